/* smbdlite: the shared part of the sample (issue 19 §4): its wire messages, its state, and the connection
 * helpers of transport.c (waits, buffers, credits, receives). smbdlite.c has the server, the client, the
 * device and DriverEntry / DriverUnload. */
#pragma once

#include <ntddk.h>
#include <wdmsec.h>
#include <ndis.h>
#include <netioapi.h>
#include <ip2string.h>
#include <wsk.h>
#include <wskndk.h>

#define SD_TAG 'dbmS' /* "Smbd" in a pool dump */
#define SD_PORT 44600
#define SD_MAGIC 0x444D4253u /* "SBMD" */
#define SD_CHANNELS 2
#define SD_RECEIVE_DEPTH 8
#define SD_SEND_DEPTH 16
#define SD_SLOT_SIZE 128
#define SD_SEND_SLOT SD_RECEIVE_DEPTH /* slots 0..7 receive, 8.. send */
#define SD_SEND_SLOTS 8
#define SD_FRMR_POOL 4
#define SD_CHUNK_SIZE (64 * 1024)
#define SD_CHUNK_PAGES (SD_CHUNK_SIZE / PAGE_SIZE + 1)
#define SD_FILE_SIZE (5 * SD_CHUNK_SIZE + 1234)
#define SD_WAIT_MS 15000
#define SD_MAX_CONNECTIONS SD_CHANNELS

#define IOCTL_SD_WRITE CTL_CODE(FILE_DEVICE_NETWORK, 0x801, METHOD_BUFFERED, FILE_ANY_ACCESS)
#define IOCTL_SD_READ CTL_CODE(FILE_DEVICE_NETWORK, 0x802, METHOD_BUFFERED, FILE_ANY_ACCESS)

typedef enum _SD_ROLE { SdRoleBoth = 0, SdRoleServer = 1, SdRoleClient = 2 } SD_ROLE;
typedef enum _SD_COMMAND { SdWrite = 1, SdRead = 2, SdResponse = 3, SdDone = 4 } SD_COMMAND;

/* The connect private data: SMB Direct's negotiation, reduced to what this transport needs. */
typedef struct _SD_NEGOTIATE {
    ULONG Magic;
    USHORT Credits; /* receives the sender posted */
    USHORT Channel;
} SD_NEGOTIATE;

/* A data transfer message (MS-SMBD 2.2.3, with an SMB2-like READ/WRITE in it). */
typedef struct _SD_MESSAGE {
    USHORT CreditsRequested;
    USHORT CreditsGranted;
    USHORT Command;
    USHORT Reserved;
    ULONG RequestId;
    NTSTATUS Status;
    ULONG64 FileOffset;
    ULONG64 Address;
    ULONG Length;
    UINT32 Token;
    ULONG Checksum;
} SD_MESSAGE, *PSD_MESSAGE;

typedef struct _SD_WAIT {
    KEVENT Event;
    NTSTATUS Status;
    NDK_OBJECT_HEADER* Object;
} SD_WAIT, *PSD_WAIT;

/* One fast-register MR of the client's pool. */
typedef struct _SD_FRMR {
    NDK_MR* Mr;
    BOOLEAN Busy;
    UINT32 Token; /* the registration in flight */
    ULONG RequestId;
} SD_FRMR;

/* One connection, either side: its own adapter open, PD, CQ, QP, connector and message slots. */
typedef struct _SD_CONNECTION {
    ULONG Index;
    NDK_ADAPTER* Adapter;
    NDK_PD* Pd;
    NDK_CQ* Cq;
    NDK_QP* Qp;
    NDK_CONNECTOR* Connector;
    BOOLEAN Connected;
    KEVENT CqEvent;
    KEVENT Disconnected;
    UINT32 PrivilegedToken;
    PUCHAR Slots;
    PMDL SlotsMdl;
    PNDK_LOGICAL_ADDRESS_MAPPING SlotsLam;
    ULONG SlotsFbo; /* the slots' first byte in the LAM's first page */
    ULONG NextSendSlot;
    ULONG SendCredits;                  /* Sends we may post: the peer's posted receives */
    ULONG GrantPending;                 /* receives reposted since our last message: granted in the next one */
    BOOLEAN SharedPd;                   /* client: the channels share the adapter's PD (and so the FRMR pool) */
    NDK_MR* StoreMr;                    /* server: the store, registered on this connection's PD */
    SD_MESSAGE Stash[SD_RECEIVE_DEPTH]; /* messages that came while a Read, Write or registration was waited for */
    NDK_RESULT_EX StashResult[SD_RECEIVE_DEPTH];
    ULONG StashHead, StashCount;
    PIO_WORKITEM Worker;
    KEVENT WorkerDone;
} SD_CONNECTION, *PSD_CONNECTION;

typedef struct _SD_DRIVER {
    PDEVICE_OBJECT Device;
    WSK_REGISTRATION WskRegistration;
    WSK_CLIENT_DISPATCH WskClientDispatch;
    WSK_CLIENT_NPI WskClient;
    WSK_PROVIDER_NPI WskProvider;
    BOOLEAN WskCaptured;
    WSK_PROVIDER_NDK_DISPATCH Ndk;
    SD_ROLE Role;
    IN_ADDR Address, LocalAddress;
    USHORT Port;
    NET_IFINDEX ServerIfIndex, ClientIfIndex;
    KEVENT Stop;      /* DriverUnload: every wait ends */
    KEVENT Listening; /* the server listens: the client may connect */
    KEVENT ClientDone;
    KEVENT ServerDone;
    EX_RUNDOWN_REF Rundown;
    /* server */
    NDK_ADAPTER* ListenAdapter;
    NDK_LISTENER* Listener;
    KSPIN_LOCK IncomingLock;
    NDK_CONNECTOR* Incoming[SD_MAX_CONNECTIONS];
    ULONG IncomingCount;
    KEVENT IncomingEvent;
    PIO_WORKITEM AcceptItem;
    SD_CONNECTION Served[SD_MAX_CONNECTIONS];
    ULONG ServedCount;
    PUCHAR Store;
    PMDL StoreMdl;
    volatile LONG ServedDone;
    /* client */
    PIO_WORKITEM ClientItem;
    NDK_ADAPTER* ClientAdapter; /* the client's adapter: PD and CQs of its channels hang off it */
    NDK_PD* ClientPd;           /* one PD for every channel: the FRMR pool serves them all */
    SD_CONNECTION Channels[SD_CHANNELS];
    SD_FRMR Pool[SD_FRMR_POOL];
    PUCHAR Data;
    PMDL DataMdl;
    PNDK_LOGICAL_ADDRESS_MAPPING DataLam;
    ULONG DataFbo;
    ULONG NextRequestId;
    ULONG Transferred;
} SD_DRIVER;

extern SD_DRIVER g_Sd;

#define SdLog(...) DbgPrintEx(DPFLTR_IHVNETWORK_ID, DPFLTR_INFO_LEVEL, __VA_ARGS__)

/* A message or completion the protocol does not allow: said, with where, and STATUS_INVALID_NETWORK_RESPONSE. */
#define SdProtocolError(line) \
    (SdLog("smbdlite: protocol error detected at %s:%d\n", __FILE__, (int)(line)), STATUS_INVALID_NETWORK_RESPONSE)

UCHAR SdPattern(SIZE_T Offset);
ULONG SdChecksum(const UCHAR* Data, SIZE_T Length);
VOID SdInitWait(PSD_WAIT Wait);
VOID SdCreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* Object);
VOID SdRequestDone(PVOID Context, NTSTATUS Status);
VOID SdCloseDone(PVOID Context);
NTSTATUS SdWaitOrStop(PKEVENT Event);
NTSTATUS SdFinish(NTSTATUS Status, PSD_WAIT Wait);
NTSTATUS SdFinishCreate(NTSTATUS Status, PSD_WAIT Wait, PVOID* Object);
VOID SdClose(NDK_OBJECT_HEADER* Object, NDK_FN_CLOSE_OBJECT Close);
VOID SdCloseIgnored(PVOID Context);
VOID SdCqNotification(PVOID Context, NTSTATUS CqStatus);
VOID SdDisconnectEvent(PVOID Context);
NTSTATUS SdOpenAdapter(NET_IFINDEX IfIndex, NDK_ADAPTER** Adapter);
NTSTATUS SdAllocate(NDK_ADAPTER* Adapter, SIZE_T Length, PUCHAR* Buffer, PMDL* Mdl, PNDK_LOGICAL_ADDRESS_MAPPING* Lam,
                    PULONG Fbo);
VOID SdFree(NDK_ADAPTER* Adapter, PUCHAR* Buffer, PMDL* Mdl, PNDK_LOGICAL_ADDRESS_MAPPING* Lam);
NTSTATUS SdSetUpConnection(PSD_CONNECTION Connection, NDK_ADAPTER* Adapter, NDK_PD* SharedPd);
NDK_SGE SdSlotSge(PSD_CONNECTION Connection, ULONG Slot, ULONG Length);
PSD_MESSAGE SdSlot(PSD_CONNECTION Connection, ULONG Slot);
NTSTATUS SdNextResult(PSD_CONNECTION Connection, PNDK_RESULT_EX Result);
BOOLEAN SdIsReceive(const NDK_RESULT_EX* Result);
NTSTATUS SdRepost(PSD_CONNECTION Connection, ULONG Slot);
NTSTATUS SdSend(PSD_CONNECTION Connection, PSD_MESSAGE Message, UINT32 InvalidateToken);
NTSTATUS SdTakeReceive(PSD_CONNECTION Connection, const NDK_RESULT_EX* Result, PSD_MESSAGE Message);
NTSTATUS SdReceive(PSD_CONNECTION Connection, PSD_MESSAGE Message, PNDK_RESULT_EX Received);
NTSTATUS SdWaitInitiator(PSD_CONNECTION Connection, PVOID Context);
VOID SdTearDownConnection(PSD_CONNECTION Connection, BOOLEAN CloseAdapter);
