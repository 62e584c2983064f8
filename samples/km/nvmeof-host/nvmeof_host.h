/* nvmeof-host: an NVMe over Fabrics RDMA host written as a Windows kernel driver is. queue.c has one queue's
 * connection (CM private data, command and response slots, a fast-register MR per command, submission and
 * completion); host.c has the controller bring-up, the I/O test, keep-alive and DriverEntry / DriverUnload. */
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

#define NH_TAG 'hfmN' /* "Nmfh" in a pool dump */
#define NH_ADMIN_DEPTH 32
#define NH_MAX_DEPTH 64
#define NH_MAX_IO_QUEUES 4
#define NH_MAX_TRANSFER (128 * 1024)
#define NH_SLOT_PAGES (NH_MAX_TRANSFER / PAGE_SIZE + 1)
#define NH_RESPONSE_SLOT 64 /* bytes per response receive: a 16-byte CQE, with room to see a longer one */
#define NH_WAIT_MS 15000
#define NH_KEEP_ALIVE_MS 10000 /* KATO asked for; a Keep Alive goes every half of it */

/* How a command's data moves. */
typedef enum _NH_DATA { NhNoData = 0, NhToTarget = 1, NhFromTarget = 2 } NH_DATA;

/* One command slot of a queue: its capsule, its data (a slice of the queue's data buffer) and its FRMR. */
typedef struct _NH_COMMAND {
    BOOLEAN Busy;
    BOOLEAN SendDone;     /* the capsule's Send completed */
    BOOLEAN ResponseDone; /* the response capsule came */
    BOOLEAN Registered;   /* the FRMR holds a registration: invalidated before the slot is free */
    BOOLEAN RemoteInvalidate;
    NDK_MR* Mr;
    UINT32 Token;
    NVME_COMPLETION Response;
    ULONG Length;
    ULONG64 Tag; /* the caller's: which blocks this command moves */
} NH_COMMAND;

typedef struct _NH_QUEUE {
    USHORT Id;
    USHORT Depth;
    ULONG InCapsuleBytes; /* data the target takes inside a command capsule (0: none) */
    BOOLEAN RemoteInvalidate;
    NDK_ADAPTER* Adapter;
    NDK_PD* Pd;
    NDK_CQ* Cq;
    NDK_QP* Qp;
    NDK_CONNECTOR* Connector;
    BOOLEAN Connected;
    KEVENT CqEvent;
    KEVENT Disconnected;
    UINT32 PrivilegedToken;
    USHORT TargetDepth; /* the target's receive queue size, from its CM accept */
    PUCHAR Capsules;    /* Depth command capsules of (64 + InCapsule) bytes, then Depth response slots */
    ULONG CapsuleSize;
    PMDL CapsulesMdl;
    PNDK_LOGICAL_ADDRESS_MAPPING CapsulesLam;
    ULONG CapsulesFbo;
    PUCHAR Data; /* Depth slices of NH_MAX_TRANSFER */
    PMDL DataMdl;
    PNDK_LOGICAL_ADDRESS_MAPPING DataLam;
    ULONG DataFbo;
    ULONG InFlight;
    ULONG Flushed; /* completions that came back flushed in a teardown */
    /* what the queue did, said at the end: how each command's data went and who invalidated its MR */
    ULONG InCapsuleWrites, KeyedCommands, RemoteInvalidations, LocalInvalidations, RemoteNotHonoured;
    NH_COMMAND Commands[NH_MAX_DEPTH];
} NH_QUEUE, *PNH_QUEUE;

typedef struct _NH_WAIT {
    KEVENT Event;
    NTSTATUS Status;
    NDK_OBJECT_HEADER* Object;
} NH_WAIT, *PNH_WAIT;

typedef struct _NH_DRIVER {
    PDEVICE_OBJECT Device;
    WSK_REGISTRATION WskRegistration;
    WSK_CLIENT_DISPATCH WskClientDispatch;
    WSK_CLIENT_NPI WskClient;
    WSK_PROVIDER_NPI WskProvider;
    BOOLEAN WskCaptured;
    WSK_PROVIDER_NDK_DISPATCH Ndk;
    NDK_ADAPTER* Adapter;
    NDK_PD* Pd;
    /* parameters */
    IN_ADDR Address, LocalAddress;
    USHORT Port;
    CHAR SubsystemNqn[224];
    ULONG IoQueues, QueueDepth, TestBytes;
    ULONG Benchmark, BenchSeconds; /* Benchmark=1: timed runs on I/O queue 1 instead of the two checked passes */
    ULONG Probe;                   /* Probe=1: commands the target must refuse, before the passes */
    BOOLEAN LocalInvalidateOnly;   /* Invalidate=local: never ask the target to invalidate */
    BOOLEAN RemoteInvalidateOnly;  /* Invalidate=remote: always ask it */
    NET_IFINDEX IfIndex;
    /* controller */
    NH_QUEUE Admin;
    NH_QUEUE Io[NH_MAX_IO_QUEUES];
    USHORT ControllerId;
    ULONG64 Capabilities;
    ULONG InCapsuleBytes;
    ULONG MaxTransfer;
    ULONG BlockSize;
    ULONG64 Blocks;
    UCHAR HostId[16];
    /* keep-alive: a timer DPC wakes a worker that owns the admin queue while I/O runs */
    KTIMER KeepAliveTimer;
    KDPC KeepAliveDpc;
    KEVENT KeepAliveDue;
    KEVENT KeepAliveStop;
    KEVENT KeepAliveDone;
    PIO_WORKITEM KeepAliveItem;
    BOOLEAN KeepAliveRunning;
    ULONG KeepAlivesSent;
    NTSTATUS KeepAliveStatus;
    /* lifetime */
    PIO_WORKITEM HostItem;
    KEVENT Stop;
    KEVENT HostDone;
    EX_RUNDOWN_REF Rundown;
    NTSTATUS Result;
} NH_DRIVER;

extern NH_DRIVER g_Nh;

#define NhLog(...) DbgPrintEx(DPFLTR_IHVNETWORK_ID, DPFLTR_INFO_LEVEL, __VA_ARGS__)
#define NhProtocolError(line) \
    (NhLog("nvmeof-host: protocol error at %s:%d\n", __FILE__, (int)(line)), STATUS_INVALID_NETWORK_RESPONSE)

PCSTR NhStatusText(NTSTATUS Status);
VOID NhStep(PCSTR Step, NTSTATUS Status);
VOID NhInitWait(PNH_WAIT Wait);
VOID NhCreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* Object);
VOID NhRequestDone(PVOID Context, NTSTATUS Status);
NTSTATUS NhWaitOrStop(PKEVENT Event, ULONG Milliseconds);
NTSTATUS NhFinish(NTSTATUS Status, PNH_WAIT Wait);
NTSTATUS NhFinishCreate(NTSTATUS Status, PNH_WAIT Wait, PVOID* Object);
VOID NhClose(NDK_OBJECT_HEADER* Object, NDK_FN_CLOSE_OBJECT Close);
NTSTATUS NhAllocate(SIZE_T Length, PUCHAR* Buffer, PMDL* Mdl, PNDK_LOGICAL_ADDRESS_MAPPING* Lam, PULONG Fbo);
VOID NhFree(PUCHAR* Buffer, PMDL* Mdl, PNDK_LOGICAL_ADDRESS_MAPPING* Lam);

NTSTATUS NhConnectQueue(PNH_QUEUE Queue);
LONG NhNextFreeSlot(PNH_QUEUE Queue);
NTSTATUS NhSubmit(PNH_QUEUE Queue, NVME_COMMAND* Command, NH_DATA Direction, ULONG Length, ULONG64 Tag, PULONG Slot);
NTSTATUS NhReap(PNH_QUEUE Queue, PULONG Slot, ULONG Milliseconds);
NTSTATUS NhExecute(PNH_QUEUE Queue, NVME_COMMAND* Command, NH_DATA Direction, ULONG Length, NVME_COMPLETION* Response);
PUCHAR NhSlotData(PNH_QUEUE Queue, ULONG Slot);
VOID NhRelease(PNH_QUEUE Queue, ULONG Slot);
NTSTATUS NhFlushInFlight(PNH_QUEUE Queue);
VOID NhTearDownQueue(PNH_QUEUE Queue);
VOID NhHostWorker(PDEVICE_OBJECT Device, PVOID Context);
VOID NhKeepAliveDpc(PKDPC Dpc, PVOID Context, PVOID Argument1, PVOID Argument2);
