/*++

Module Name:

    filepush.c

Abstract:

    A sample NDK consumer driver in the style of the WDK samples (issue 9 §4): an SMB-Direct-like file push.
    A client pushes a "file" (a pattern in non-paged pool) to a server over RDMA, both in this one driver:

      client                                         server
      ------                                         ------
      connect, private data {size, receipt MR} --->  connect event (DISPATCH_LEVEL): queue the connector
                                                     accept, private data {credits}
      per chunk:
        NdkFastRegister(file pages, remote read)
        NdkSend PUSH {offset, length, va, token} ->  NdkRead the chunk into its file buffer
                                                <-   NdkWrite the chunk's checksum into the receipt MR
                                                <-   NdkSendAndInvalidate ACK (invalidates the client's FRMR)
        check the receipt, re-register the FRMR
      NdkSend DONE {size, checksum}             ->   verify the whole file
                                                <-   NdkSend DONE_ACK
      NdkDisconnect                                  disconnect event, NdkDisconnect

    Sends and receives use the privileged token with logical addresses from NdkBuildLAM; the file buffer of the
    server is a registered MR (read sink); the client's chunks are fast-registered and invalidated remotely.
    Every asynchronous NDK call is made synchronous with a KEVENT. Work items run the two sides at
    PASSIVE_LEVEL; a timer DPC is the watchdog; an interlocked LIST_ENTRY queue carries connectors from the
    connect event to the server; a lookaside list supplies the queue entries.

    Its parameters come from the registry, under RegistryPath\Parameters (softndk-kmhost --parameter):
      Role     REG_SZ     "both" (default: server and client in this driver), "server" or "client"
      Address       REG_SZ     the server's IPv4 address (default 127.0.0.1)
      LocalAddress  REG_SZ     the client's own address (default: Address, the server on this host)
      Port          REG_DWORD  the server's port (default 44500)
    Each side opens the adapter of the interface holding its own address.
    With "server" in one process and "client" in another the push goes over iWARP/TCP, on this host or
    between two.

Environment:

    Kernel mode (softndk kernel layer).

--*/

#include <ntddk.h>
#include <ndis.h>
#include <ntstrsafe.h>
#include <netioapi.h>
#include <ip2string.h>
#include <wsk.h>
#include <wskndk.h>

#define FP_TAG 'hsPF' /* "FPsh" in a pool dump */
#define FP_EVENT_TAG 'vEPF'
#define FP_PORT 44500 /* the default of the Port parameter */
#define FP_FILE_SIZE (256 * 1024 + 777)
#define FP_CHUNK_SIZE (64 * 1024)
#define FP_CHUNK_PAGES (FP_CHUNK_SIZE / PAGE_SIZE)
#define FP_MAX_CHUNKS 16
#define FP_SLOT_SIZE 256
#define FP_RECEIVE_SLOTS 4 /* slots 0..3 receive, 4..7 send */
#define FP_SEND_SLOT 4
#define FP_RECEIPT_SLOT 5
#define FP_MAGIC 0x48535046u /* "FPSH" */
#define FP_WAIT_MS 10000
#define FP_WATCHDOG_MS 20000

typedef enum _FP_ROLE { FpRoleBoth = 0, FpRoleServer = 1, FpRoleClient = 2 } FP_ROLE;

typedef enum _FP_MESSAGE_TYPE { FpPush = 1, FpAck = 2, FpDone = 3, FpDoneAck = 4 } FP_MESSAGE_TYPE;

typedef struct _FP_MESSAGE {
    ULONG Type;
    ULONG Chunk;
    ULONG Offset;
    ULONG Length;
    ULONG64 Address;
    UINT32 Token;
    ULONG Checksum;
} FP_MESSAGE, *PFP_MESSAGE;

typedef struct _FP_HELLO {
    ULONG Magic;
    ULONG FileSize;
    ULONG64 ReceiptAddress;
    UINT32 ReceiptToken;
} FP_HELLO;

/* One wait context per asynchronous call: the completion fills it and sets the event. */
typedef struct _FP_WAIT {
    KEVENT Event;
    NTSTATUS Status;
    NDK_OBJECT_HEADER* Object;
} FP_WAIT, *PFP_WAIT;

/* An entry of the connector queue or of the stashed-receive queue. */
typedef struct _FP_EVENT {
    LIST_ENTRY Link;
    NDK_CONNECTOR* Connector;
    NDK_RESULT_EX Result;
} FP_EVENT, *PFP_EVENT;

typedef struct _FP_SIDE {
    const char* Name;
    NDK_ADAPTER* Adapter;
    NDK_PD* Pd;
    NDK_CQ* Cq;
    NDK_QP* Qp;
    NDK_CONNECTOR* Connector;
    NDK_LISTENER* Listener;
    BOOLEAN Connected;
    KEVENT CqEvent;
    KEVENT Disconnected;
    UINT32 PrivilegedToken;
    PUCHAR Messages; /* one page of FP_SLOT_SIZE slots */
    PMDL MessagesMdl;
    PNDK_LOGICAL_ADDRESS_MAPPING MessagesLam;
    PUCHAR File;
    PMDL FileMdl;
    PNDK_LOGICAL_ADDRESS_MAPPING FileLam; /* client: the FRMR page source */
    NDK_MR* FileMr;                       /* server: read sink */
    NDK_MR* FastMr;                       /* client: FRMR */
    PUCHAR Receipts;                      /* client: the server writes checksums here */
    PMDL ReceiptsMdl;
    NDK_MR* ReceiptsMr;
    LIST_ENTRY Stashed; /* receive completions that arrived while waiting for something else */
} FP_SIDE, *PFP_SIDE;

typedef struct _FP_DRIVER {
    PDEVICE_OBJECT Device;
    WSK_REGISTRATION WskRegistration;
    WSK_CLIENT_DISPATCH WskClientDispatch;
    WSK_CLIENT_NPI WskClient;
    WSK_PROVIDER_NPI WskProvider;
    BOOLEAN WskCaptured;
    WSK_PROVIDER_NDK_DISPATCH Ndk;
    NET_IFINDEX IfIndex;
    FP_ROLE Role;         /* the parameters (FpReadParameters) */
    IN_ADDR Address;      /* the server's */
    IN_ADDR LocalAddress; /* the client's */
    USHORT Port;
    NPAGED_LOOKASIDE_LIST Events;
    KSPIN_LOCK IncomingLock;
    LIST_ENTRY Incoming;
    KEVENT IncomingEvent;
    KEVENT Listening;
    KEVENT Abort;
    KEVENT ServerDone;
    KEVENT ClientDone;
    PIO_WORKITEM ServerItem;
    PIO_WORKITEM ClientItem;
    KTIMER Watchdog;
    KDPC WatchdogDpc;
    EX_RUNDOWN_REF Rundown;
    volatile LONG Running; /* workers still running; the last one disarms the watchdog */
    FP_SIDE Server;
    FP_SIDE Client;
} FP_DRIVER;

static FP_DRIVER g_Fp;

DRIVER_INITIALIZE DriverEntry;
static DRIVER_UNLOAD FpUnload;
static IO_WORKITEM_ROUTINE FpServerWorker;
static IO_WORKITEM_ROUTINE FpClientWorker;
static KDEFERRED_ROUTINE FpWatchdogDpc;

#define FpLog(...) DbgPrintEx(DPFLTR_IHVNETWORK_ID, DPFLTR_INFO_LEVEL, __VA_ARGS__)

/* ---- helpers ------------------------------------------------------------------------------------------ */

static ULONG FpChecksum(const UCHAR* Data, SIZE_T Length) {
    ULONG hash = 2166136261u; /* FNV-1a */
    for (SIZE_T i = 0; i < Length; ++i) hash = (hash ^ Data[i]) * 16777619u;
    return hash;
}

static UCHAR FpPattern(SIZE_T Offset) {
    return (UCHAR)(Offset * 7 + Offset / PAGE_SIZE);
}

static VOID FpArmWatchdog(void) {
    LARGE_INTEGER due;
    due.QuadPart = -(LONGLONG)FP_WATCHDOG_MS * 10000;
    KeSetTimer(&g_Fp.Watchdog, due, &g_Fp.WatchdogDpc);
}

static VOID FpWatchdogDpc(PKDPC Dpc, PVOID Context, PVOID Arg1, PVOID Arg2) {
    UNREFERENCED_PARAMETER(Dpc);
    UNREFERENCED_PARAMETER(Context);
    UNREFERENCED_PARAMETER(Arg1);
    UNREFERENCED_PARAMETER(Arg2);
    NT_ASSERT(KeGetCurrentIrql() == DISPATCH_LEVEL);
    FpLog("filepush: watchdog: no progress for %u ms, aborting\n", FP_WATCHDOG_MS);
    KeSetEvent(&g_Fp.Abort, IO_NO_INCREMENT, FALSE);
}

static VOID FpInitWait(PFP_WAIT Wait) {
    KeInitializeEvent(&Wait->Event, NotificationEvent, FALSE);
    Wait->Status = STATUS_PENDING;
    Wait->Object = NULL;
}

static VOID FpCreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* Object) {
    PFP_WAIT wait = (PFP_WAIT)Context;
    wait->Status = Status;
    wait->Object = Object;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

static VOID FpRequestDone(PVOID Context, NTSTATUS Status) {
    PFP_WAIT wait = (PFP_WAIT)Context;
    wait->Status = Status;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

static VOID FpCloseDone(PVOID Context) {
    KeSetEvent(&((PFP_WAIT)Context)->Event, IO_NO_INCREMENT, FALSE);
}

static VOID FpCloseIgnored(PVOID Context) {
    UNREFERENCED_PARAMETER(Context);
}

/* A pended call completes later: wait for it (the context lives on this stack until then). */
static NTSTATUS FpFinish(NTSTATUS Status, PFP_WAIT Wait) {
    PAGED_CODE();
    if (Status != STATUS_PENDING) return Status;
    KeWaitForSingleObject(&Wait->Event, Executive, KernelMode, FALSE, NULL);
    return Wait->Status;
}

/* Create functions return the object inline or through the completion (LIFE-02). */
static NTSTATUS FpFinishCreate(NTSTATUS Status, PFP_WAIT Wait, PVOID* Object) {
    if (Status == STATUS_PENDING) {
        Status = FpFinish(Status, Wait);
        if (NT_SUCCESS(Status)) *Object = Wait->Object;
    }
    return Status;
}

static VOID FpClose(NDK_OBJECT_HEADER* Object, NDK_FN_CLOSE_OBJECT Close) {
    FP_WAIT wait;
    PAGED_CODE();
    FpInitWait(&wait);
    if (Close(Object, FpCloseDone, &wait) == STATUS_PENDING)
        KeWaitForSingleObject(&wait.Event, Executive, KernelMode, FALSE, NULL);
}

static VOID FpCqNotification(PVOID Context, NTSTATUS CqStatus) {
    PFP_SIDE side = (PFP_SIDE)Context;
    UNREFERENCED_PARAMETER(CqStatus);
    KeSetEvent(&side->CqEvent, IO_NO_INCREMENT, FALSE); /* DISPATCH_LEVEL: signal, never wait */
}

static VOID FpDisconnectEvent(PVOID Context) {
    KeSetEvent(&((PFP_SIDE)Context)->Disconnected, IO_NO_INCREMENT, FALSE);
}

/* The listener's connect event runs at DISPATCH_LEVEL: queue the connector for the server worker. */
static VOID FpConnectEvent(PVOID Context, NDK_CONNECTOR* Connector) {
    KLOCK_QUEUE_HANDLE lock;
    PFP_EVENT entry;
    UNREFERENCED_PARAMETER(Context);
    entry = (PFP_EVENT)ExAllocateFromNPagedLookasideList(&g_Fp.Events);
    if (entry == NULL) {
        Connector->Dispatch->NdkReject(Connector, NULL, 0);
        Connector->Dispatch->NdkCloseConnector(&Connector->Header, FpCloseIgnored, NULL);
        return;
    }
    entry->Connector = Connector;
    KeAcquireInStackQueuedSpinLock(&g_Fp.IncomingLock, &lock);
    InsertTailList(&g_Fp.Incoming, &entry->Link);
    KeReleaseInStackQueuedSpinLock(&lock);
    KeSetEvent(&g_Fp.IncomingEvent, IO_NO_INCREMENT, FALSE);
}

/* Waits for Event or the driver-wide abort; STATUS_IO_TIMEOUT after FP_WAIT_MS. */
static NTSTATUS FpWaitOrAbort(PKEVENT Event) {
    PVOID objects[2];
    LARGE_INTEGER timeout;
    NTSTATUS status;
    objects[0] = Event;
    objects[1] = &g_Fp.Abort;
    timeout.QuadPart = -(LONGLONG)FP_WAIT_MS * 10000;
    status = KeWaitForMultipleObjects(2, objects, WaitAny, Executive, KernelMode, FALSE, &timeout, NULL);
    if (status == STATUS_WAIT_0) return STATUS_SUCCESS;
    return status == STATUS_TIMEOUT ? STATUS_IO_TIMEOUT : STATUS_REQUEST_ABORTED;
}

/* The next completion: from the CQ, arming it and waiting when it is empty. */
static NTSTATUS FpNextResult(PFP_SIDE Side, PNDK_RESULT_EX Result) {
    PAGED_CODE();
    for (;;) {
        if (Side->Cq->Dispatch->NdkGetCqResultsEx(Side->Cq, Result, 1) == 1) return STATUS_SUCCESS;
        KeClearEvent(&Side->CqEvent);
        Side->Cq->Dispatch->NdkArmCq(Side->Cq, NDK_CQ_NOTIFY_ANY);
        if (Side->Cq->Dispatch->NdkGetCqResultsEx(Side->Cq, Result, 1) == 1) return STATUS_SUCCESS;
        NTSTATUS status = FpWaitOrAbort(&Side->CqEvent);
        if (!NT_SUCCESS(status)) return status;
    }
}

static BOOLEAN FpIsReceive(const NDK_RESULT_EX* Result) {
    return Result->Type == NdkOperationTypeReceive || Result->Type == NdkOperationTypeReceiveAndInvalidate;
}

/* Waits for the completion of the initiator request Context; receives that arrive meanwhile are stashed. */
static NTSTATUS FpWaitRequest(PFP_SIDE Side, PVOID Context) {
    NDK_RESULT_EX result;
    for (;;) {
        NTSTATUS status = FpNextResult(Side, &result);
        if (!NT_SUCCESS(status)) return status;
        if (FpIsReceive(&result)) {
            PFP_EVENT entry = (PFP_EVENT)ExAllocateFromNPagedLookasideList(&g_Fp.Events);
            if (entry == NULL) return STATUS_INSUFFICIENT_RESOURCES;
            entry->Result = result;
            InsertTailList(&Side->Stashed, &entry->Link);
            if (!NT_SUCCESS(result.Status)) return result.Status;
            continue;
        }
        if (result.RequestContext != Context) return STATUS_INTERNAL_ERROR;
        return result.Status;
    }
}

static NTSTATUS FpWaitReceive(PFP_SIDE Side, PNDK_RESULT_EX Result) {
    if (!IsListEmpty(&Side->Stashed)) {
        PFP_EVENT entry = CONTAINING_RECORD(RemoveHeadList(&Side->Stashed), FP_EVENT, Link);
        *Result = entry->Result;
        ExFreeToNPagedLookasideList(&g_Fp.Events, entry);
    } else {
        NTSTATUS status = FpNextResult(Side, Result);
        if (!NT_SUCCESS(status)) return status;
        if (!FpIsReceive(Result)) return STATUS_INTERNAL_ERROR;
    }
    return Result->Status;
}

/* An SGE over message slot Slot: a logical address of the LAM with the privileged token. */
static NDK_SGE FpSlotSge(PFP_SIDE Side, ULONG Slot, ULONG Length) {
    NDK_SGE sge;
    RtlZeroMemory(&sge, sizeof(sge));
    sge.LogicalAddress.QuadPart = Side->MessagesLam->AdapterPageArray[0].QuadPart + (LONGLONG)Slot * FP_SLOT_SIZE;
    sge.Length = Length;
    sge.MemoryRegionToken = Side->PrivilegedToken;
    return sge;
}

static PFP_MESSAGE FpSlot(PFP_SIDE Side, ULONG Slot) {
    return (PFP_MESSAGE)(Side->Messages + Slot * FP_SLOT_SIZE);
}

static NTSTATUS FpPostReceive(PFP_SIDE Side, ULONG Slot) {
    NDK_SGE sge = FpSlotSge(Side, Slot, FP_SLOT_SIZE);
    return Side->Qp->Dispatch->NdkReceive(Side->Qp, (PVOID)(ULONG_PTR)(Slot + 1), &sge, 1);
}

static NTSTATUS FpSend(PFP_SIDE Side, const FP_MESSAGE* Message, BOOLEAN Invalidate, UINT32 Token) {
    NDK_SGE sge = FpSlotSge(Side, FP_SEND_SLOT, sizeof(FP_MESSAGE));
    NTSTATUS status;
    RtlCopyMemory(FpSlot(Side, FP_SEND_SLOT), Message, sizeof(FP_MESSAGE));
    status = Invalidate ? Side->Qp->Dispatch->NdkSendAndInvalidate(Side->Qp, Side, &sge, 1, 0, Token)
                        : Side->Qp->Dispatch->NdkSend(Side->Qp, Side, &sge, 1, 0);
    return NT_SUCCESS(status) ? FpWaitRequest(Side, Side) : status;
}

/* Non-paged pool + MDL + optional LAM. */
static NTSTATUS FpAllocateBuffer(PFP_SIDE Side, SIZE_T Length, PUCHAR* Buffer, PMDL* Mdl,
                                 PNDK_LOGICAL_ADDRESS_MAPPING* Lam) {
    FP_WAIT wait;
    ULONG size, fbo;
    NTSTATUS status;
    *Buffer = (PUCHAR)ExAllocatePool2(POOL_FLAG_NON_PAGED, Length, FP_TAG);
    if (*Buffer == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    *Mdl = IoAllocateMdl(*Buffer, (ULONG)Length, FALSE, FALSE, NULL);
    if (*Mdl == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    MmBuildMdlForNonPagedPool(*Mdl);
    if (Lam == NULL) return STATUS_SUCCESS;
    size = NDK_LAM_SIZE(ADDRESS_AND_SIZE_TO_SPAN_PAGES(*Buffer, Length));
    *Lam = (PNDK_LOGICAL_ADDRESS_MAPPING)ExAllocatePoolWithTag(NonPagedPoolNx, size, FP_TAG);
    if (*Lam == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    FpInitWait(&wait);
    status = Side->Adapter->Dispatch->NdkBuildLAM(Side->Adapter, *Mdl, Length, FpRequestDone, &wait, *Lam, &size, &fbo);
    status = FpFinish(status, &wait);
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(*Lam, FP_TAG);
        *Lam = NULL;
    }
    return status;
}

static VOID FpFreeBuffer(PFP_SIDE Side, PUCHAR* Buffer, PMDL* Mdl, PNDK_LOGICAL_ADDRESS_MAPPING* Lam) {
    if (Lam != NULL && *Lam != NULL) {
        Side->Adapter->Dispatch->NdkReleaseLAM(Side->Adapter, *Lam);
        ExFreePoolWithTag(*Lam, FP_TAG);
        *Lam = NULL;
    }
    if (*Mdl != NULL) {
        IoFreeMdl(*Mdl);
        *Mdl = NULL;
    }
    if (*Buffer != NULL) {
        ExFreePoolWithTag(*Buffer, FP_TAG);
        *Buffer = NULL;
    }
}

static NTSTATUS FpCreateMr(PFP_SIDE Side, BOOLEAN Fast, NDK_MR** Mr) {
    FP_WAIT wait;
    FpInitWait(&wait);
    return FpFinishCreate(Side->Pd->Dispatch->NdkCreateMr(Side->Pd, Fast, FpCreateDone, &wait, Mr), &wait, (PVOID*)Mr);
}

static NTSTATUS FpRegister(NDK_MR* Mr, PMDL Mdl, SIZE_T Length, ULONG Flags) {
    FP_WAIT wait;
    FpInitWait(&wait);
    return FpFinish(Mr->Dispatch->NdkRegisterMr(Mr, Mdl, Length, Flags, FpRequestDone, &wait), &wait);
}

/* Adapter, PD, CQ, QP and the message slots (NdkBuildLAM + privileged token). */
static NTSTATUS FpOpenSide(PFP_SIDE Side) {
    FP_WAIT wait;
    NTSTATUS status;
    NDK_VERSION version = {2, 0};
    PAGED_CODE();
    /* WDK 10.0.26100 consumers ask for NDK 2.0; fall back to 1.x when the provider answers BAD_VERSION. */
    status = g_Fp.Ndk.WskOpenNdkAdapter(g_Fp.WskProvider.Client, version, g_Fp.IfIndex, &Side->Adapter);
    if (status == NDIS_STATUS_BAD_VERSION) {
        version.Major = 1;
        status = g_Fp.Ndk.WskOpenNdkAdapter(g_Fp.WskProvider.Client, version, g_Fp.IfIndex, &Side->Adapter);
    }
    if (!NT_SUCCESS(status)) return status;
    FpInitWait(&wait);
    status = FpFinishCreate(Side->Adapter->Dispatch->NdkCreatePd(Side->Adapter, FpCreateDone, &wait, &Side->Pd), &wait,
                            (PVOID*)&Side->Pd);
    if (!NT_SUCCESS(status)) return status;
    FpInitWait(&wait);
    status = FpFinishCreate(Side->Adapter->Dispatch->NdkCreateCq(Side->Adapter, 64, FpCqNotification, Side, NULL,
                                                                 FpCreateDone, &wait, &Side->Cq),
                            &wait, (PVOID*)&Side->Cq);
    if (!NT_SUCCESS(status)) return status;
    FpInitWait(&wait);
    status = FpFinishCreate(Side->Pd->Dispatch->NdkCreateQp(Side->Pd, Side->Cq, Side->Cq, Side, 8, 8, 1, 1, 0,
                                                            FpCreateDone, &wait, &Side->Qp),
                            &wait, (PVOID*)&Side->Qp);
    if (!NT_SUCCESS(status)) return status;
    Side->Pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(Side->Pd, &Side->PrivilegedToken);
    return FpAllocateBuffer(Side, PAGE_SIZE, &Side->Messages, &Side->MessagesMdl, &Side->MessagesLam);
}

/* Connectors the connect event queued that the server never took (it aborted first). */
static VOID FpDrainIncoming(void) {
    KLOCK_QUEUE_HANDLE lock;
    for (;;) {
        PFP_EVENT entry = NULL;
        KeAcquireInStackQueuedSpinLock(&g_Fp.IncomingLock, &lock);
        if (!IsListEmpty(&g_Fp.Incoming)) entry = CONTAINING_RECORD(RemoveHeadList(&g_Fp.Incoming), FP_EVENT, Link);
        KeReleaseInStackQueuedSpinLock(&lock);
        if (entry == NULL) return;
        entry->Connector->Dispatch->NdkReject(entry->Connector, NULL, 0);
        FpClose(&entry->Connector->Header, entry->Connector->Dispatch->NdkCloseConnector);
        ExFreeToNPagedLookasideList(&g_Fp.Events, entry);
    }
}

static VOID FpCloseSide(PFP_SIDE Side) {
    FP_WAIT wait;
    PAGED_CODE();
    if (Side->Connector != NULL && Side->Connected) {
        FpInitWait(&wait);
        FpFinish(Side->Connector->Dispatch->NdkDisconnect(Side->Connector, FpRequestDone, &wait), &wait);
    }
    /* A listener's close waits for the connectors it handed out (CM-22): close the connector first. */
    if (Side->Connector != NULL) FpClose(&Side->Connector->Header, Side->Connector->Dispatch->NdkCloseConnector);
    if (Side->Listener != NULL) FpClose(&Side->Listener->Header, Side->Listener->Dispatch->NdkCloseListener);
    FpDrainIncoming();
    if (Side->Qp != NULL) FpClose(&Side->Qp->Header, Side->Qp->Dispatch->NdkCloseQp);
    if (Side->FastMr != NULL) FpClose(&Side->FastMr->Header, Side->FastMr->Dispatch->NdkCloseMr);
    if (Side->FileMr != NULL) FpClose(&Side->FileMr->Header, Side->FileMr->Dispatch->NdkCloseMr);
    if (Side->ReceiptsMr != NULL) FpClose(&Side->ReceiptsMr->Header, Side->ReceiptsMr->Dispatch->NdkCloseMr);
    if (Side->Cq != NULL) FpClose(&Side->Cq->Header, Side->Cq->Dispatch->NdkCloseCq);
    if (Side->Adapter != NULL) {
        FpFreeBuffer(Side, &Side->Messages, &Side->MessagesMdl, &Side->MessagesLam);
        FpFreeBuffer(Side, &Side->File, &Side->FileMdl, &Side->FileLam);
        FpFreeBuffer(Side, &Side->Receipts, &Side->ReceiptsMdl, NULL);
    }
    if (Side->Pd != NULL) FpClose(&Side->Pd->Header, Side->Pd->Dispatch->NdkClosePd);
    while (!IsListEmpty(&Side->Stashed))
        ExFreeToNPagedLookasideList(&g_Fp.Events, CONTAINING_RECORD(RemoveHeadList(&Side->Stashed), FP_EVENT, Link));
    if (Side->Adapter != NULL) g_Fp.Ndk.WskCloseNdkAdapter(g_Fp.WskProvider.Client, Side->Adapter);
    Side->Adapter = NULL;
}

/* The server's address (the Address parameter) with Port; port 0 lets the provider choose. */
static VOID FpServerAddress(SOCKADDR_IN* Address, USHORT Port) {
    RtlZeroMemory(Address, sizeof(*Address));
    Address->sin_family = AF_INET;
    Address->sin_port = RtlUshortByteSwap(Port);
    Address->sin_addr = g_Fp.Address;
}

/* ---- server ------------------------------------------------------------------------------------------- */

static NTSTATUS FpServe(PFP_SIDE Side) {
    FP_WAIT wait;
    NTSTATUS status;
    SOCKADDR_IN address;
    KLOCK_QUEUE_HANDLE lock;
    PFP_EVENT incoming = NULL;
    FP_HELLO hello, reply;
    ULONG inbound = 0, outbound = 0, length = sizeof(hello), chunks = 0, slot;
    NDK_RESULT_EX result;
    PAGED_CODE();

    status = FpOpenSide(Side);
    if (!NT_SUCCESS(status)) return status;
    FpInitWait(&wait);
    status = FpFinishCreate(Side->Adapter->Dispatch->NdkCreateListener(Side->Adapter, FpConnectEvent, Side,
                                                                       FpCreateDone, &wait, &Side->Listener),
                            &wait, (PVOID*)&Side->Listener);
    if (!NT_SUCCESS(status)) return status;
    FpServerAddress(&address, g_Fp.Port);
    FpInitWait(&wait);
    status = FpFinish(Side->Listener->Dispatch->NdkListen(Side->Listener, (CONST PSOCKADDR)&address, sizeof(address),
                                                          FpRequestDone, &wait),
                      &wait);
    if (!NT_SUCCESS(status)) return status;
    FpLog("filepush: server listening on port %u\n", g_Fp.Port);
    KeSetEvent(&g_Fp.Listening, IO_NO_INCREMENT, FALSE);

    status = FpWaitOrAbort(&g_Fp.IncomingEvent);
    if (!NT_SUCCESS(status)) return status;
    KeAcquireInStackQueuedSpinLock(&g_Fp.IncomingLock, &lock);
    if (!IsListEmpty(&g_Fp.Incoming)) incoming = CONTAINING_RECORD(RemoveHeadList(&g_Fp.Incoming), FP_EVENT, Link);
    KeReleaseInStackQueuedSpinLock(&lock);
    if (incoming == NULL) return STATUS_INTERNAL_ERROR;
    Side->Connector = incoming->Connector;
    ExFreeToNPagedLookasideList(&g_Fp.Events, incoming);

    status = Side->Connector->Dispatch->NdkGetConnectionData(Side->Connector, &inbound, &outbound, &hello, &length);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(hello) || hello.Magic != FP_MAGIC || hello.FileSize == 0 ||
        hello.FileSize > FP_MAX_CHUNKS * FP_CHUNK_SIZE) {
        Side->Connector->Dispatch->NdkReject(Side->Connector, NULL, 0);
        return STATUS_INVALID_NETWORK_RESPONSE;
    }
    status = FpAllocateBuffer(Side, hello.FileSize, &Side->File, &Side->FileMdl, NULL);
    if (!NT_SUCCESS(status)) return status;
    status = FpCreateMr(Side, FALSE, &Side->FileMr);
    if (!NT_SUCCESS(status)) return status;
    status = FpRegister(Side->FileMr, Side->FileMdl, hello.FileSize,
                        NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK);
    if (!NT_SUCCESS(status)) return status;
    for (slot = 0; slot < FP_RECEIVE_SLOTS; ++slot) {
        status = FpPostReceive(Side, slot);
        if (!NT_SUCCESS(status)) return status;
    }
    reply.Magic = FP_MAGIC;
    reply.FileSize = hello.FileSize;
    reply.ReceiptAddress = 0;
    reply.ReceiptToken = 0;
    FpInitWait(&wait);
    status =
        FpFinish(Side->Connector->Dispatch->NdkAccept(Side->Connector, Side->Qp, inbound, outbound, &reply,
                                                      sizeof(reply), FpDisconnectEvent, Side, FpRequestDone, &wait),
                 &wait);
    if (!NT_SUCCESS(status)) return status;
    Side->Connected = TRUE;

    for (;;) {
        PFP_MESSAGE message;
        FP_MESSAGE answer;
        NDK_SGE sink, receipt;
        status = FpWaitReceive(Side, &result);
        if (!NT_SUCCESS(status)) return status;
        slot = (ULONG)(ULONG_PTR)result.RequestContext - 1;
        message = FpSlot(Side, slot);
        RtlZeroMemory(&answer, sizeof(answer));
        if (message->Type == FpPush) {
            if (message->Offset + (ULONG64)message->Length > hello.FileSize) return STATUS_INVALID_NETWORK_RESPONSE;
            /* RDMA read the chunk straight into the file MR. */
            sink.VirtualAddress = Side->File + message->Offset;
            sink.Length = message->Length;
            sink.MemoryRegionToken = Side->FileMr->Dispatch->NdkGetLocalTokenFromMr(Side->FileMr);
            status = Side->Qp->Dispatch->NdkRead(Side->Qp, &sink, &sink, 1, message->Address, message->Token, 0);
            if (NT_SUCCESS(status)) status = FpWaitRequest(Side, &sink);
            if (!NT_SUCCESS(status)) return status;
            /* RDMA write the chunk's checksum into the client's receipt MR. */
            *(PULONG)FpSlot(Side, FP_RECEIPT_SLOT) = FpChecksum(Side->File + message->Offset, message->Length);
            receipt = FpSlotSge(Side, FP_RECEIPT_SLOT, sizeof(ULONG));
            status = Side->Qp->Dispatch->NdkWrite(Side->Qp, &receipt, &receipt, 1,
                                                  hello.ReceiptAddress + message->Chunk * sizeof(ULONG),
                                                  hello.ReceiptToken, 0);
            if (NT_SUCCESS(status)) status = FpWaitRequest(Side, &receipt);
            if (!NT_SUCCESS(status)) return status;
            /* ACK and invalidate the client's fast registration remotely. */
            answer.Type = FpAck;
            answer.Chunk = message->Chunk;
            answer.Token = message->Token;
            ++chunks;
            status = FpPostReceive(Side, slot);
            if (NT_SUCCESS(status)) status = FpSend(Side, &answer, TRUE, message->Token);
            if (!NT_SUCCESS(status)) return status;
        } else if (message->Type == FpDone) {
            ULONG checksum = FpChecksum(Side->File, hello.FileSize);
            SIZE_T i;
            for (i = 0; i < hello.FileSize; ++i)
                if (Side->File[i] != FpPattern(i)) KeBugCheckEx(0xF11E0BAD, i, Side->File[i], FpPattern(i), 0);
            if (checksum != message->Checksum || message->Length != hello.FileSize)
                KeBugCheckEx(0xF11E0BAD, checksum, message->Checksum, message->Length, 0);
            FpLog("filepush: server verified %u bytes in %u chunks (checksum 0x%08x)\n", hello.FileSize, chunks,
                  checksum);
            answer.Type = FpDoneAck;
            status = FpSend(Side, &answer, FALSE, 0);
            if (!NT_SUCCESS(status)) return status;
            break;
        } else {
            return STATUS_INVALID_NETWORK_RESPONSE;
        }
    }
    /* Graceful disconnect: the client disconnects first; FpCloseSide answers with NdkDisconnect. */
    return FpWaitOrAbort(&Side->Disconnected);
}

static VOID FpServerWorker(PDEVICE_OBJECT Device, PVOID Context) {
    NTSTATUS status;
    UNREFERENCED_PARAMETER(Device);
    UNREFERENCED_PARAMETER(Context);
    PAGED_CODE();
    status = FpServe(&g_Fp.Server);
    if (!NT_SUCCESS(status)) {
        FpLog("filepush: server aborted: 0x%08X\n", status);
        KeSetEvent(&g_Fp.Abort, IO_NO_INCREMENT, FALSE);
    }
    FpCloseSide(&g_Fp.Server);
    if (InterlockedDecrement(&g_Fp.Running) == 0) KeCancelTimer(&g_Fp.Watchdog);
    KeSetEvent(&g_Fp.ServerDone, IO_NO_INCREMENT, FALSE);
    ExReleaseRundownProtection(&g_Fp.Rundown);
}

/* ---- client ------------------------------------------------------------------------------------------- */

static NTSTATUS FpPushFile(PFP_SIDE Side) {
    FP_WAIT wait;
    NTSTATUS status;
    SOCKADDR_IN source, destination;
    FP_HELLO hello;
    FP_MESSAGE message;
    NDK_RESULT_EX result;
    ULONG offset, chunk = 0, slot, i;
    PAGED_CODE();

    status = FpWaitOrAbort(&g_Fp.Listening);
    if (!NT_SUCCESS(status)) return status;
    status = FpOpenSide(Side);
    if (!NT_SUCCESS(status)) return status;
    /* The "file", and the LAM its fast registrations take pages from. */
    status = FpAllocateBuffer(Side, FP_FILE_SIZE, &Side->File, &Side->FileMdl, &Side->FileLam);
    if (!NT_SUCCESS(status)) return status;
    for (i = 0; i < FP_FILE_SIZE; ++i) Side->File[i] = FpPattern(i);
    status = FpCreateMr(Side, TRUE, &Side->FastMr);
    if (!NT_SUCCESS(status)) return status;
    FpInitWait(&wait);
    status = FpFinish(
        Side->FastMr->Dispatch->NdkInitializeFastRegisterMr(Side->FastMr, FP_CHUNK_PAGES, TRUE, FpRequestDone, &wait),
        &wait);
    if (!NT_SUCCESS(status)) return status;
    /* The receipts the server writes with NdkWrite. */
    status = FpAllocateBuffer(Side, PAGE_SIZE, &Side->Receipts, &Side->ReceiptsMdl, NULL);
    if (!NT_SUCCESS(status)) return status;
    status = FpCreateMr(Side, FALSE, &Side->ReceiptsMr);
    if (!NT_SUCCESS(status)) return status;
    status = FpRegister(Side->ReceiptsMr, Side->ReceiptsMdl, PAGE_SIZE, NDK_MR_FLAG_ALLOW_REMOTE_WRITE);
    if (!NT_SUCCESS(status)) return status;
    for (slot = 0; slot < FP_RECEIVE_SLOTS; ++slot) {
        status = FpPostReceive(Side, slot);
        if (!NT_SUCCESS(status)) return status;
    }

    FpInitWait(&wait);
    status = FpFinishCreate(
        Side->Adapter->Dispatch->NdkCreateConnector(Side->Adapter, FpCreateDone, &wait, &Side->Connector), &wait,
        (PVOID*)&Side->Connector);
    if (!NT_SUCCESS(status)) return status;
    hello.Magic = FP_MAGIC;
    hello.FileSize = FP_FILE_SIZE;
    hello.ReceiptAddress = (ULONG64)(ULONG_PTR)Side->Receipts;
    hello.ReceiptToken = Side->ReceiptsMr->Dispatch->NdkGetRemoteTokenFromMr(Side->ReceiptsMr);
    FpServerAddress(&source, 0);
    source.sin_addr = g_Fp.LocalAddress;
    FpServerAddress(&destination, g_Fp.Port);
    FpInitWait(&wait);
    status =
        FpFinish(Side->Connector->Dispatch->NdkConnect(
                     Side->Connector, Side->Qp, (CONST PSOCKADDR)&source, sizeof(source), (CONST PSOCKADDR)&destination,
                     sizeof(destination), 4, 4, &hello, sizeof(hello), FpRequestDone, &wait),
                 &wait);
    if (!NT_SUCCESS(status)) return status;
    FpInitWait(&wait);
    status = FpFinish(
        Side->Connector->Dispatch->NdkCompleteConnect(Side->Connector, FpDisconnectEvent, Side, FpRequestDone, &wait),
        &wait);
    if (!NT_SUCCESS(status)) return status;
    Side->Connected = TRUE;

    for (offset = 0; offset < FP_FILE_SIZE; offset += FP_CHUNK_SIZE, ++chunk) {
        ULONG length = min(FP_CHUNK_SIZE, FP_FILE_SIZE - offset);
        ULONG pages = ADDRESS_AND_SIZE_TO_SPAN_PAGES(Side->File + offset, length);
        UINT32 token;
        /* Fast-register this chunk's pages for remote read; the token changes every cycle (TOK). */
        status = Side->Qp->Dispatch->NdkFastRegister(Side->Qp, Side->FastMr, Side->FastMr, pages,
                                                     &Side->FileLam->AdapterPageArray[offset / PAGE_SIZE], 0, length,
                                                     Side->File + offset, NDK_OP_FLAG_ALLOW_REMOTE_READ);
        if (NT_SUCCESS(status)) status = FpWaitRequest(Side, Side->FastMr);
        if (!NT_SUCCESS(status)) return status;
        token = Side->FastMr->Dispatch->NdkGetRemoteTokenFromMr(Side->FastMr);
        RtlZeroMemory(&message, sizeof(message));
        message.Type = FpPush;
        message.Chunk = chunk;
        message.Offset = offset;
        message.Length = length;
        message.Address = (ULONG64)(ULONG_PTR)(Side->File + offset);
        message.Token = token;
        status = FpSend(Side, &message, FALSE, 0);
        if (!NT_SUCCESS(status)) return status;
        status = FpWaitReceive(Side, &result);
        if (!NT_SUCCESS(status)) return status;
        slot = (ULONG)(ULONG_PTR)result.RequestContext - 1;
        if (FpSlot(Side, slot)->Type != FpAck || FpSlot(Side, slot)->Chunk != chunk ||
            result.Type != NdkOperationTypeReceiveAndInvalidate || (UINT32)result.TypeSpecificCompletionOutput != token)
            return STATUS_INVALID_NETWORK_RESPONSE;
        if (((PULONG)Side->Receipts)[chunk] != FpChecksum(Side->File + offset, length))
            KeBugCheckEx(0xF11E0BAD, chunk, ((PULONG)Side->Receipts)[chunk], 0, 0);
        status = FpPostReceive(Side, slot);
        if (!NT_SUCCESS(status)) return status;
        FpArmWatchdog(); /* progress */
    }
    RtlZeroMemory(&message, sizeof(message));
    message.Type = FpDone;
    message.Length = FP_FILE_SIZE;
    message.Checksum = FpChecksum(Side->File, FP_FILE_SIZE);
    status = FpSend(Side, &message, FALSE, 0);
    if (!NT_SUCCESS(status)) return status;
    status = FpWaitReceive(Side, &result);
    if (!NT_SUCCESS(status)) return status;
    if (FpSlot(Side, (ULONG)(ULONG_PTR)result.RequestContext - 1)->Type != FpDoneAck)
        return STATUS_INVALID_NETWORK_RESPONSE;
    FpLog("filepush: client pushed %u bytes in %u chunks\n", FP_FILE_SIZE, chunk);
    return STATUS_SUCCESS; /* FpCloseSide disconnects gracefully */
}

static VOID FpClientWorker(PDEVICE_OBJECT Device, PVOID Context) {
    NTSTATUS status;
    UNREFERENCED_PARAMETER(Device);
    UNREFERENCED_PARAMETER(Context);
    PAGED_CODE();
    status = FpPushFile(&g_Fp.Client);
    if (!NT_SUCCESS(status)) {
        FpLog("filepush: client aborted: 0x%08X\n", status);
        KeSetEvent(&g_Fp.Abort, IO_NO_INCREMENT, FALSE);
    }
    FpCloseSide(&g_Fp.Client);
    if (InterlockedDecrement(&g_Fp.Running) == 0) KeCancelTimer(&g_Fp.Watchdog);
    KeSetEvent(&g_Fp.ClientDone, IO_NO_INCREMENT, FALSE);
    ExReleaseRundownProtection(&g_Fp.Rundown);
}

/* ---- DriverEntry / DriverUnload ----------------------------------------------------------------------- */

/* One value of RegistryPath\Parameters into Buffer; STATUS_OBJECT_NAME_NOT_FOUND leaves the default. */
static NTSTATUS FpQueryParameter(HANDLE Key, PCWSTR Name, ULONG Type, PVOID Buffer, ULONG Size) {
    UCHAR storage[sizeof(KEY_VALUE_PARTIAL_INFORMATION) + 64 * sizeof(WCHAR)];
    PKEY_VALUE_PARTIAL_INFORMATION value = (PKEY_VALUE_PARTIAL_INFORMATION)storage;
    UNICODE_STRING name;
    ULONG length = 0;
    NTSTATUS status;
    PAGED_CODE();
    RtlInitUnicodeString(&name, Name);
    status = ZwQueryValueKey(Key, &name, KeyValuePartialInformation, value, sizeof(storage), &length);
    if (status == STATUS_OBJECT_NAME_NOT_FOUND) return STATUS_SUCCESS;
    if (!NT_SUCCESS(status)) return status;
    if (value->Type != Type || value->DataLength > Size) return STATUS_INVALID_PARAMETER;
    RtlCopyMemory(Buffer, value->Data, value->DataLength);
    return STATUS_SUCCESS;
}

static NTSTATUS FpReadParameters(PUNICODE_STRING RegistryPath) {
    static const WCHAR parameters[] = L"\\Parameters";
    UNICODE_STRING path;
    OBJECT_ATTRIBUTES attributes;
    HANDLE key = NULL;
    WCHAR role[16] = {0}, address[32] = {0}, local[32] = {0};
    ULONG port = FP_PORT;
    PCWSTR end = NULL;
    NTSTATUS status;
    PAGED_CODE();
    g_Fp.Role = FpRoleBoth;
    g_Fp.Address.S_un.S_addr = RtlUlongByteSwap(0x7F000001);
    g_Fp.LocalAddress = g_Fp.Address;
    g_Fp.Port = FP_PORT;
    path.Length = 0;
    path.MaximumLength = (USHORT)(RegistryPath->Length + sizeof(parameters));
    path.Buffer = (PWCH)ExAllocatePool2(POOL_FLAG_PAGED, path.MaximumLength, FP_TAG);
    if (path.Buffer == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    RtlCopyUnicodeString(&path, RegistryPath);
    status = RtlAppendUnicodeToString(&path, parameters);
    if (NT_SUCCESS(status)) {
        InitializeObjectAttributes(&attributes, &path, OBJ_CASE_INSENSITIVE | OBJ_KERNEL_HANDLE, NULL, NULL);
        status = ZwOpenKey(&key, KEY_READ, &attributes);
    }
    ExFreePoolWithTag(path.Buffer, FP_TAG);
    if (status == STATUS_OBJECT_NAME_NOT_FOUND) return STATUS_SUCCESS; /* no parameters: the defaults */
    if (!NT_SUCCESS(status)) return status;
    status = FpQueryParameter(key, L"Role", REG_SZ, role, sizeof(role) - sizeof(WCHAR));
    if (NT_SUCCESS(status))
        status = FpQueryParameter(key, L"Address", REG_SZ, address, sizeof(address) - sizeof(WCHAR));
    if (NT_SUCCESS(status))
        status = FpQueryParameter(key, L"LocalAddress", REG_SZ, local, sizeof(local) - sizeof(WCHAR));
    if (NT_SUCCESS(status)) status = FpQueryParameter(key, L"Port", REG_DWORD, &port, sizeof(port));
    ZwClose(key);
    if (!NT_SUCCESS(status)) return status;
    if (role[0] != 0) {
        UNICODE_STRING text, server, client, both;
        RtlInitUnicodeString(&text, role);
        RtlInitUnicodeString(&server, L"server");
        RtlInitUnicodeString(&client, L"client");
        RtlInitUnicodeString(&both, L"both");
        if (RtlEqualUnicodeString(&text, &server, TRUE)) {
            g_Fp.Role = FpRoleServer;
        } else if (RtlEqualUnicodeString(&text, &client, TRUE)) {
            g_Fp.Role = FpRoleClient;
        } else if (!RtlEqualUnicodeString(&text, &both, TRUE)) {
            return STATUS_INVALID_PARAMETER;
        }
    }
    if (address[0] != 0) {
        status = RtlIpv4StringToAddressW(address, TRUE, &end, &g_Fp.Address);
        if (!NT_SUCCESS(status) || *end != 0) return STATUS_INVALID_PARAMETER;
    }
    g_Fp.LocalAddress = g_Fp.Address;
    if (local[0] != 0) {
        status = RtlIpv4StringToAddressW(local, TRUE, &end, &g_Fp.LocalAddress);
        if (!NT_SUCCESS(status) || *end != 0) return STATUS_INVALID_PARAMETER;
    }
    if (port == 0 || port > 0xFFFF) return STATUS_INVALID_PARAMETER;
    g_Fp.Port = (USHORT)port;
    return STATUS_SUCCESS;
}

static NTSTATUS FpFindInterface(void) {
    const IN_ADDR own = g_Fp.Role == FpRoleClient ? g_Fp.LocalAddress : g_Fp.Address;
    PMIB_UNICASTIPADDRESS_TABLE table = NULL;
    NTSTATUS status = GetUnicastIpAddressTable(AF_INET, &table);
    ULONG i;
    if (!NT_SUCCESS(status)) return status;
    status = STATUS_NOT_FOUND;
    for (i = 0; i < table->NumEntries; ++i) {
        if (table->Table[i].Address.Ipv4.sin_addr.S_un.S_addr == own.S_un.S_addr) {
            g_Fp.IfIndex = table->Table[i].InterfaceIndex;
            status = STATUS_SUCCESS;
            break;
        }
    }
    FreeMibTable(table);
    return status;
}

static VOID FpCleanup(void) {
    KeCancelTimer(&g_Fp.Watchdog);
    KeFlushQueuedDpcs();
    if (g_Fp.ServerItem != NULL) IoFreeWorkItem(g_Fp.ServerItem);
    if (g_Fp.ClientItem != NULL) IoFreeWorkItem(g_Fp.ClientItem);
    ExDeleteNPagedLookasideList(&g_Fp.Events);
    if (g_Fp.WskCaptured) WskReleaseProviderNPI(&g_Fp.WskRegistration);
    WskDeregister(&g_Fp.WskRegistration);
    if (g_Fp.Device != NULL) IoDeleteDevice(g_Fp.Device);
}

static VOID FpUnload(PDRIVER_OBJECT DriverObject) {
    PVOID done[2];
    UNREFERENCED_PARAMETER(DriverObject);
    PAGED_CODE();
    done[0] = &g_Fp.ServerDone;
    done[1] = &g_Fp.ClientDone;
    KeSetEvent(&g_Fp.Abort, IO_NO_INCREMENT, FALSE); /* if still running, stop */
    KeWaitForMultipleObjects(2, done, WaitAll, Executive, KernelMode, FALSE, NULL, NULL);
    ExWaitForRundownProtectionRelease(&g_Fp.Rundown);
    FpCleanup();
    FpLog("filepush: unloaded\n");
}

NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath) {
    NTSTATUS status;
    SIZE_T returned = 0;
    LONG workers;
    PAGED_CODE();

    RtlZeroMemory(&g_Fp, sizeof(g_Fp));
    g_Fp.Server.Name = "server";
    g_Fp.Client.Name = "client";
    InitializeListHead(&g_Fp.Server.Stashed);
    InitializeListHead(&g_Fp.Client.Stashed);
    KeInitializeEvent(&g_Fp.Server.CqEvent, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Fp.Client.CqEvent, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Fp.Server.Disconnected, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Fp.Client.Disconnected, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Fp.IncomingEvent, SynchronizationEvent, FALSE);
    KeInitializeEvent(&g_Fp.Listening, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Fp.Abort, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Fp.ServerDone, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Fp.ClientDone, NotificationEvent, FALSE);
    KeInitializeSpinLock(&g_Fp.IncomingLock);
    InitializeListHead(&g_Fp.Incoming);
    ExInitializeNPagedLookasideList(&g_Fp.Events, NULL, NULL, 0, sizeof(FP_EVENT), FP_EVENT_TAG, 0);
    KeInitializeTimer(&g_Fp.Watchdog);
    KeInitializeDpc(&g_Fp.WatchdogDpc, FpWatchdogDpc, NULL);
    ExInitializeRundownProtection(&g_Fp.Rundown);
    status = FpReadParameters(RegistryPath);
    if (!NT_SUCCESS(status)) {
        FpLog("filepush: bad parameters: 0x%08X\n", status);
        goto fail;
    }

    status = IoCreateDevice(DriverObject, 0, NULL, FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN, FALSE, &g_Fp.Device);
    if (!NT_SUCCESS(status)) goto fail;
    g_Fp.WskClientDispatch.Version = MAKE_WSK_VERSION(1, 0);
    g_Fp.WskClient.ClientContext = NULL;
    g_Fp.WskClient.Dispatch = &g_Fp.WskClientDispatch;
    status = WskRegister(&g_Fp.WskClient, &g_Fp.WskRegistration);
    if (!NT_SUCCESS(status)) goto fail_device;
    status = WskCaptureProviderNPI(&g_Fp.WskRegistration, WSK_INFINITE_WAIT, &g_Fp.WskProvider);
    if (!NT_SUCCESS(status)) goto fail_wsk;
    g_Fp.WskCaptured = TRUE;
    status = g_Fp.WskProvider.Dispatch->WskControlClient(g_Fp.WskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH,
                                                         0, NULL, sizeof(g_Fp.Ndk), &g_Fp.Ndk, &returned, NULL);
    if (!NT_SUCCESS(status)) goto fail_wsk;
    status = FpFindInterface();
    if (!NT_SUCCESS(status)) goto fail_wsk;

    g_Fp.ServerItem = IoAllocateWorkItem(g_Fp.Device);
    g_Fp.ClientItem = IoAllocateWorkItem(g_Fp.Device);
    if (g_Fp.ServerItem == NULL || g_Fp.ClientItem == NULL) {
        status = STATUS_INSUFFICIENT_RESOURCES;
        goto fail_wsk;
    }
    DriverObject->DriverUnload = FpUnload;
    workers = g_Fp.Role == FpRoleBoth ? 2 : 1;
    ExAcquireRundownProtectionEx(&g_Fp.Rundown, (ULONG)workers);
    g_Fp.Running = workers;
    if (g_Fp.Role == FpRoleClient) {
        KeSetEvent(&g_Fp.Listening, IO_NO_INCREMENT, FALSE); /* the server is elsewhere */
        KeSetEvent(&g_Fp.ServerDone, IO_NO_INCREMENT, FALSE);
    }
    if (g_Fp.Role == FpRoleServer) KeSetEvent(&g_Fp.ClientDone, IO_NO_INCREMENT, FALSE);
    FpArmWatchdog();
    if (g_Fp.Role != FpRoleClient) IoQueueWorkItem(g_Fp.ServerItem, FpServerWorker, DelayedWorkQueue, NULL);
    if (g_Fp.Role != FpRoleServer) IoQueueWorkItem(g_Fp.ClientItem, FpClientWorker, DelayedWorkQueue, NULL);
    FpLog("filepush: loaded as %s, %u bytes over interface %u, port %u\n",
          g_Fp.Role == FpRoleBoth     ? "server and client"
          : g_Fp.Role == FpRoleServer ? "server"
                                      : "client",
          FP_FILE_SIZE, g_Fp.IfIndex, g_Fp.Port);
    return STATUS_SUCCESS;

fail_wsk:
fail_device:
    FpCleanup();
    return status;
fail:
    ExDeleteNPagedLookasideList(&g_Fp.Events);
    return status;
}
