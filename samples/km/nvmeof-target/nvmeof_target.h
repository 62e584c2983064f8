/* nvmeof-target: an NVMe over Fabrics RDMA target with a RAM namespace, written as a Windows kernel driver is.
 * driver.c has DriverEntry / DriverUnload, the listener and the accept work item; connection.c one connection's
 * set-up, its completion work item (driven by CQ notifications) and its teardown; commands.c what each admin,
 * Fabrics and I/O command does. */
#pragma once

#include <ntddk.h>
#include <wdmsec.h>
#include <ndis.h>
#include <netioapi.h>
#include <ip2string.h>
#include <wsk.h>
#include <wskndk.h>
#include <ntstrsafe.h>

#include "../nvmeof/nvme_fabrics.h"

#define NT_TAG 'tfmN' /* "Nmft" in a pool dump */
#define NT_MAX_CONNECTIONS 8
#define NT_MAX_CONTROLLERS 4
#define NT_MAX_DEPTH 128
#define NT_IN_CAPSULE 4096                                     /* data a command capsule may carry */
#define NT_CAPSULE_SLOT (sizeof(NVME_COMMAND) + NT_IN_CAPSULE) /* one receive */
#define NT_STAGING 4096                                        /* per slot: Identify, log pages, Connect data */
#define NT_MAX_TRANSFER (128 * 1024)                           /* MDTS 5: 2^5 pages */
#define NT_AER_LIMIT 4                                         /* AERL + 1 */

/* RDMA CM reject status of the NVMe-oF RDMA binding (§7.3.1). */
#define NT_CM_INVALID_LENGTH 0x01
#define NT_CM_INVALID_RECFMT 0x02
#define NT_CM_INVALID_QID 0x03
#define NT_CM_INVALID_HSQSIZE 0x04
#define NT_CM_NO_RESOURCES 0x06

typedef enum _NT_SLOT_STATE { NtSlotFree = 0, NtSlotReading, NtSlotResponding, NtSlotHeld } NT_SLOT_STATE;

/* One command in progress: its capsule's copy, its response and its staging. A capsule's receive buffer is
 * posted again as soon as the command is copied out, so there are two contexts per receive buffer: a host may
 * send its next command once it has our response, before our Send of it has completed here. */
typedef struct _NT_SLOT {
    NT_SLOT_STATE State;
    NVME_COMMAND Command;
    ULONG CapsuleBytes; /* what the receive brought */
    BOOLEAN Keyed;      /* the command's SGL is keyed: Address, Length, Key */
    BOOLEAN Invalidate; /* and asks for Send with Invalidate */
    ULONG64 Address;
    ULONG Length;
    ULONG Key;
} NT_SLOT;

typedef struct _NT_CONTROLLER {
    BOOLEAN InUse;
    USHORT Id;
    ULONG Configuration; /* CC */
    ULONG Status;        /* CSTS */
    ULONG IoQueues;      /* allowed, from Set Features Number of Queues */
    ULONG KeepAliveMs;
    ULONG AsyncEventConfig;
    ULONG Connections; /* admin + I/O queues attached */
    BOOLEAN Lost;      /* its admin queue is gone: the association is over, its I/O queues end too */
    CHAR HostNqn[256];
} NT_CONTROLLER;

typedef struct _NT_CONNECTION {
    BOOLEAN InUse;
    ULONG Index;
    NDK_CONNECTOR* Connector;
    NDK_CQ* Cq;
    NDK_QP* Qp;
    NDK_MR* BufferMr;
    BOOLEAN Accepted;
    USHORT QueueId;
    USHORT Depth;
    NT_CONTROLLER* Controller; /* after Fabrics Connect */
    PUCHAR Buffers;            /* Depth capsules; per context a response and a staging area */
    PMDL BuffersMdl;
    UINT32 BufferToken;
    volatile LONG WorkState; /* 0 idle, 1 running, 2 running and asked again */
    volatile LONG Disconnected;
    PIO_WORKITEM Item;
    NTSTATUS Failure; /* what ended it, when not the host's disconnect */
    ULONG Commands, ReadsFromHost, WritesToHost, InCapsule, SendInvalidates, HeldEvents;
    NT_SLOT Slots[2 * NT_MAX_DEPTH];
} NT_CONNECTION, *PNT_CONNECTION;

#define NT_CONTEXTS(connection) (2u * (connection)->Depth)

typedef struct _NT_WAIT {
    KEVENT Event;
    NTSTATUS Status;
    NDK_OBJECT_HEADER* Object;
} NT_WAIT, *PNT_WAIT;

typedef struct _NT_DRIVER {
    PDEVICE_OBJECT Device;
    WSK_REGISTRATION WskRegistration;
    WSK_CLIENT_DISPATCH WskClientDispatch;
    WSK_CLIENT_NPI WskClient;
    WSK_PROVIDER_NPI WskProvider;
    BOOLEAN WskCaptured;
    WSK_PROVIDER_NDK_DISPATCH Ndk;
    NDK_ADAPTER* Adapter;
    NDK_PD* Pd;
    NDK_LISTENER* Listener;
    /* parameters */
    IN_ADDR Address;
    USHORT Port;
    CHAR SubsystemNqn[224];
    ULONG NamespaceBytes, BlockSize, MaxIoQueues;
    NET_IFINDEX IfIndex;
    /* the namespace */
    PUCHAR Ram;
    PMDL RamMdl;
    NDK_MR* RamMr;
    UINT32 RamToken;
    /* connections */
    KSPIN_LOCK Lock;
    NDK_CONNECTOR* Pending[NT_MAX_CONNECTIONS];
    ULONG PendingCount;
    BOOLEAN Closing;
    volatile LONG AcceptState;
    PIO_WORKITEM AcceptItem;
    NT_CONNECTION Connections[NT_MAX_CONNECTIONS];
    NT_CONTROLLER Controllers[NT_MAX_CONTROLLERS];
    EX_RUNDOWN_REF Rundown;
} NT_DRIVER;

extern NT_DRIVER g_Nt;

#define NtLog(...) DbgPrintEx(DPFLTR_IHVNETWORK_ID, DPFLTR_INFO_LEVEL, __VA_ARGS__)

PCSTR NtStatusText(NTSTATUS Status);
VOID NtInitWait(PNT_WAIT Wait);
VOID NtCreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* Object);
VOID NtRequestDone(PVOID Context, NTSTATUS Status);
NTSTATUS NtFinish(NTSTATUS Status, PNT_WAIT Wait);
NTSTATUS NtFinishCreate(NTSTATUS Status, PNT_WAIT Wait, PVOID* Object);
VOID NtClose(NDK_OBJECT_HEADER* Object, NDK_FN_CLOSE_OBJECT Close);
ULONG NtChecksum(const UCHAR* Data, SIZE_T Length);

VOID NtAcceptWorker(PDEVICE_OBJECT Device, PVOID Context);
NTSTATUS NtAccept(NDK_CONNECTOR* Connector);
VOID NtTearDownConnection(PNT_CONNECTION Connection);

/* commands.c: a command's effect. Data the host sent is in Data (staging or in-capsule), data for the host is
 * put in Data with *DataOut set; I/O reads and writes name a namespace range instead (*RamOffset). Returns the
 * NVMe status (0 on success) and fills *Result. */
typedef enum _NT_DATA_PLACE { NtDataNone = 0, NtDataStaging = 1, NtDataRam = 2 } NT_DATA_PLACE;
USHORT NtPrepare(PNT_CONNECTION Connection, const NVME_COMMAND* Command, ULONG Length, BOOLEAN* FromHost,
                 NT_DATA_PLACE* Place, ULONG64* RamOffset);
USHORT NtExecute(PNT_CONNECTION Connection, const NVME_COMMAND* Command, PUCHAR Staging, ULONG Length, ULONG64* Result,
                 BOOLEAN* Hold);
VOID NtReleaseController(NT_CONTROLLER* Controller);

/* NVMe status values (status code type << 8 | status code) */
#define NT_SC_SUCCESS 0x000
#define NT_SC_INVALID_OPCODE 0x001
#define NT_SC_INVALID_FIELD 0x002
#define NT_SC_DATA_TRANSFER_ERROR 0x004
#define NT_SC_SEQUENCE_ERROR 0x00C
#define NT_SC_SGL_INVALID_TYPE 0x011 /* also an unsupported keyed subtype */
#define NT_SC_SGL_LENGTH_INVALID 0x00F
#define NT_SC_SGL_OFFSET_INVALID 0x016
#define NT_SC_INVALID_NAMESPACE 0x00B
#define NT_SC_LBA_OUT_OF_RANGE 0x080
#define NT_SC_AER_LIMIT 0x105
#define NT_SC_CONNECT_INCOMPATIBLE_FORMAT 0x180
#define NT_SC_CONNECT_CONTROLLER_BUSY 0x181
#define NT_SC_CONNECT_INVALID_PARAMETERS 0x182
#define NT_SC_CONNECT_INVALID_HOST 0x184
#define NT_SC_DO_NOT_RETRY 0x4000 /* DNR: none of these errors goes away on a retry */
