/*++

Module Name:

    connection.c

Abstract:

    One NVMe-oF queue of nvmeof-target: accepting its connection (the host's CM request says which queue and how
    deep; the accept says how many capsules we take), and serving it.

    Serving is driven by the CQ: its notification (DISPATCH_LEVEL) queues the connection's work item, which drains
    the CQ, arms it and leaves; a notification while it runs makes it go round once more, so one connection's
    completions are never handled by two threads. A command capsule arrives in a receive slot; data the host
    sends is in the capsule or is fetched with an RDMA Read (straight into the namespace for a Write); data for
    the host goes by RDMA Write, and the response follows it in a Send, or a Send with Invalidate when the host's
    keyed SGL asked for it. The slot's receive is posted again when the response's Send completed. Asynchronous
    Event Requests keep their slot until the connection ends.

Environment:

    Kernel mode (softndk kernel layer).

--*/

#include "nvmeof_target.h"

#define NT_READ 1
#define NT_WRITE 2
#define NT_SEND 3

static PUCHAR NtCapsule(PNT_CONNECTION Connection, ULONG Slot) {
    return Connection->Buffers + (SIZE_T)Slot * NT_CAPSULE_SLOT;
}

static PUCHAR NtResponse(PNT_CONNECTION Connection, ULONG Slot) {
    return Connection->Buffers + (SIZE_T)Connection->Depth * NT_CAPSULE_SLOT + Slot * sizeof(NVME_COMPLETION);
}

static PUCHAR NtStaging(PNT_CONNECTION Connection, ULONG Slot) {
    return Connection->Buffers + (SIZE_T)Connection->Depth * NT_CAPSULE_SLOT +
           (SIZE_T)NT_CONTEXTS(Connection) * sizeof(NVME_COMPLETION) + (SIZE_T)Slot * NT_STAGING;
}

static ULONG NtBuffersSize(PNT_CONNECTION Connection) {
    return Connection->Depth * (ULONG)NT_CAPSULE_SLOT +
           NT_CONTEXTS(Connection) * (ULONG)(sizeof(NVME_COMPLETION) + NT_STAGING);
}

static NDK_SGE NtSge(PVOID Address, ULONG Length, UINT32 Token) {
    NDK_SGE sge;
    RtlZeroMemory(&sge, sizeof(sge));
    sge.VirtualAddress = Address;
    sge.Length = Length;
    sge.MemoryRegionToken = Token;
    return sge;
}

static PVOID NtContext(ULONG Slot, ULONG What) {
    return (PVOID)(ULONG_PTR)((Slot << 2) | What);
}

static NTSTATUS NtPostReceive(PNT_CONNECTION Connection, ULONG Buffer) {
    NDK_SGE sge = NtSge(NtCapsule(Connection, Buffer), NT_CAPSULE_SLOT, Connection->BufferToken);
    return Connection->Qp->Dispatch->NdkReceive(Connection->Qp, NtContext(Buffer, 0), &sge, 1);
}

/* ---- work scheduling -------------------------------------------------------------------------------------- */

static VOID NtServeWorker(PDEVICE_OBJECT Device, PVOID Context);

static VOID NtSchedule(PNT_CONNECTION Connection) {
    if (InterlockedExchange(&Connection->WorkState, 2) != 0) return; /* running: it goes round once more */
    if (!ExAcquireRundownProtection(&g_Nt.Rundown)) {
        InterlockedExchange(&Connection->WorkState, 0); /* unloading: DriverUnload tears it down */
        return;
    }
    IoQueueWorkItem(Connection->Item, NtServeWorker, DelayedWorkQueue, Connection);
}

static VOID NtCqNotification(PVOID Context, NTSTATUS CqStatus) {
    UNREFERENCED_PARAMETER(CqStatus);
    NtSchedule((PNT_CONNECTION)Context);
}

static VOID NtDisconnectEvent(PVOID Context) {
    PNT_CONNECTION connection = (PNT_CONNECTION)Context;
    InterlockedExchange(&connection->Disconnected, 1);
    if (connection->Accepted) NtSchedule(connection);
}

/* ---- a command, from its capsule to its response --------------------------------------------------------- */

static NTSTATUS NtRespond(PNT_CONNECTION Connection, ULONG Slot, USHORT Status, ULONG64 Result) {
    NT_SLOT* slot = &Connection->Slots[Slot];
    NVME_COMPLETION* response = (NVME_COMPLETION*)NtResponse(Connection, Slot);
    NDK_SGE sge = NtSge(response, sizeof(*response), Connection->BufferToken);
    RtlZeroMemory(response, sizeof(*response));
    if (Status != NT_SC_SUCCESS) Status |= NT_SC_DO_NOT_RETRY;
    response->Result = Result;
    response->SqHead = (USHORT)(Connection->Commands % Connection->Depth);
    response->SqId = Connection->QueueId;
    response->CommandId = slot->Command.CommandId;
    response->Status = (USHORT)(Status << 1);
    slot->State = NtSlotResponding;
    if (slot->Keyed && slot->Invalidate) {
        ++Connection->SendInvalidates;
        return Connection->Qp->Dispatch->NdkSendAndInvalidate(Connection->Qp, NtContext(Slot, NT_SEND), &sge, 1, 0,
                                                              slot->Key);
    }
    return Connection->Qp->Dispatch->NdkSend(Connection->Qp, NtContext(Slot, NT_SEND), &sge, 1, 0);
}

/* The data is in place: the command's effect, data back to the host if it asked for some, then the response. */
static NTSTATUS NtComplete(PNT_CONNECTION Connection, ULONG Slot) {
    NT_SLOT* slot = &Connection->Slots[Slot];
    BOOLEAN fromHost, hold;
    NT_DATA_PLACE place;
    ULONG64 ramOffset, result = 0;
    USHORT status = NtPrepare(Connection, &slot->Command, slot->Length, &fromHost, &place, &ramOffset);
    if (status == NT_SC_SUCCESS)
        status = NtExecute(Connection, &slot->Command, NtStaging(Connection, Slot), slot->Length, &result, &hold);
    if (status == NT_SC_SUCCESS && hold) {
        slot->State = NtSlotHeld;
        return STATUS_SUCCESS;
    }
    if (status == NT_SC_SUCCESS && place != NtDataNone && !fromHost) {
        NDK_SGE sge;
        ULONG length = slot->Length;
        NTSTATUS posted;
        if (!slot->Keyed) return NtRespond(Connection, Slot, NT_SC_SGL_INVALID_TYPE, 0);
        if (place == NtDataRam) {
            length = ((slot->Command.Cdw12 & 0xFFFF) + 1) * g_Nt.BlockSize;
            sge = NtSge(g_Nt.Ram + ramOffset, length, g_Nt.RamToken);
        } else {
            sge = NtSge(NtStaging(Connection, Slot), length, Connection->BufferToken);
        }
        posted = Connection->Qp->Dispatch->NdkWrite(Connection->Qp, NtContext(Slot, NT_WRITE), &sge, 1, slot->Address,
                                                    slot->Key, 0);
        if (!NT_SUCCESS(posted)) return posted;
        ++Connection->WritesToHost; /* the response's Send goes after it: posting order */
    }
    return NtRespond(Connection, Slot, status, result);
}

/* A command capsule came in receive buffer Buffer: copied out into a free context (in-capsule data straight to
 * where it goes), the buffer posted again, the command started. */
static NTSTATUS NtCommand(PNT_CONNECTION Connection, ULONG Buffer, ULONG Bytes) {
    NT_SLOT* slot = NULL;
    PUCHAR capsule = NtCapsule(Connection, Buffer);
    UCHAR type;
    BOOLEAN fromHost = FALSE;
    NT_DATA_PLACE place = NtDataNone;
    ULONG64 ramOffset = 0;
    USHORT status = NT_SC_SUCCESS;
    ULONG Slot;
    NTSTATUS posted;
    for (Slot = 0; Slot < NT_CONTEXTS(Connection); ++Slot) {
        if (Connection->Slots[Slot].State == NtSlotFree) {
            slot = &Connection->Slots[Slot];
            break;
        }
    }
    if (Bytes < sizeof(NVME_COMMAND) || slot == NULL) {
        NtLog("nvmeof-target: queue %u: a capsule of %u bytes%s\n", Connection->QueueId, Bytes,
              slot == NULL ? " with every command context busy (more commands than the queue holds)" : "");
        return STATUS_INVALID_NETWORK_RESPONSE;
    }
    RtlCopyMemory(&slot->Command, capsule, sizeof(NVME_COMMAND));
    slot->State = NtSlotResponding; /* taken until its response's Send completes (or held) */
    slot->CapsuleBytes = Bytes;
    ++Connection->Commands;
    type = slot->Command.Data.Bytes[15];
    slot->Keyed = type == NVME_SGL_KEYED_ADDRESS || type == NVME_SGL_KEYED_INVALIDATE;
    slot->Invalidate = type == NVME_SGL_KEYED_INVALIDATE;
    slot->Address = slot->Command.Data.Keyed.Address;
    slot->Key = slot->Command.Data.Keyed.Key;
    slot->Length = slot->Keyed ? NvmeKeyedSglLength(&slot->Command.Data.Keyed) : 0;
    if (!slot->Keyed && type != NVME_SGL_INCAPSULE) status = NT_SC_SGL_INVALID_TYPE;
    if (type == NVME_SGL_INCAPSULE) {
        ULONG64 offset = slot->Command.Data.InCapsule.Offset;
        slot->Length = slot->Command.Data.InCapsule.Length;
        if (offset != 0)
            status = NT_SC_SGL_OFFSET_INVALID;
        else if (slot->Length > Bytes - sizeof(NVME_COMMAND))
            status = NT_SC_SGL_LENGTH_INVALID;
    }
    if (status == NT_SC_SUCCESS)
        status = NtPrepare(Connection, &slot->Command, slot->Length, &fromHost, &place, &ramOffset);
    if (status == NT_SC_SUCCESS && fromHost) {
        ULONG length = place == NtDataRam ? ((slot->Command.Cdw12 & 0xFFFF) + 1) * g_Nt.BlockSize : slot->Length;
        if (length > (place == NtDataRam ? NT_MAX_TRANSFER : NT_STAGING)) {
            status = NT_SC_INVALID_FIELD;
        } else if (!slot->Keyed) { /* in the capsule, right behind the command: copied before the buffer goes */
            RtlCopyMemory(place == NtDataRam ? g_Nt.Ram + ramOffset : NtStaging(Connection, Slot),
                          capsule + sizeof(NVME_COMMAND), length);
            ++Connection->InCapsule;
            fromHost = FALSE; /* nothing left to fetch */
        }
    }
    posted = NtPostReceive(Connection, Buffer);
    if (!NT_SUCCESS(posted)) return posted;
    if (status != NT_SC_SUCCESS) return NtRespond(Connection, Slot, status, 0);
    if (!fromHost) return NtComplete(Connection, Slot);
    {
        ULONG length = place == NtDataRam ? ((slot->Command.Cdw12 & 0xFFFF) + 1) * g_Nt.BlockSize : slot->Length;
        PUCHAR target = place == NtDataRam ? g_Nt.Ram + ramOffset : NtStaging(Connection, Slot);
        NDK_SGE sge;
        sge = NtSge(target, length, place == NtDataRam ? g_Nt.RamToken : Connection->BufferToken);
        slot->State = NtSlotReading;
        ++Connection->ReadsFromHost;
        return Connection->Qp->Dispatch->NdkRead(Connection->Qp, NtContext(Slot, NT_READ), &sge, 1, slot->Address,
                                                 slot->Key, 0);
    }
}

static NTSTATUS NtResult(PNT_CONNECTION Connection, const NDK_RESULT_EX* Result) {
    ULONG index = (ULONG)((ULONG_PTR)Result->RequestContext >> 2),
          what = (ULONG)((ULONG_PTR)Result->RequestContext & 3);
    if (index >= (what == 0 ? Connection->Depth : NT_CONTEXTS(Connection))) return STATUS_INVALID_NETWORK_RESPONSE;
    if (!NT_SUCCESS(Result->Status)) return Result->Status; /* flushed: the connection is going */
    switch (what) {
        case 0:
            return NtCommand(Connection, index, Result->BytesTransferred);
        case NT_READ:
            return NtComplete(Connection, index);
        case NT_WRITE:
            return STATUS_SUCCESS;
        default: /* the response went: the context is free */
            Connection->Slots[index].State = NtSlotFree;
            return STATUS_SUCCESS;
    }
}

static VOID NtServeWorker(PDEVICE_OBJECT Device, PVOID Context) {
    PNT_CONNECTION connection = (PNT_CONNECTION)Context;
    UNREFERENCED_PARAMETER(Device);
    do {
        NDK_RESULT_EX results[16];
        ULONG count, i;
        InterlockedExchange(&connection->WorkState, 1);
        while (NT_SUCCESS(connection->Failure) && !connection->Disconnected &&
               (count = connection->Cq->Dispatch->NdkGetCqResultsEx(connection->Cq, results, 16)) > 0) {
            for (i = 0; i < count && NT_SUCCESS(connection->Failure); ++i) {
                NTSTATUS status = NtResult(connection, &results[i]);
                if (!NT_SUCCESS(status)) connection->Failure = status;
            }
        }
        if (!NT_SUCCESS(connection->Failure) || connection->Disconnected) {
            NtTearDownConnection(connection);
            InterlockedExchange(&connection->WorkState, 0);
            connection->InUse = FALSE; /* last: the slot may be accepted again from here on */
            ExReleaseRundownProtection(&g_Nt.Rundown);
            return;
        }
        connection->Cq->Dispatch->NdkArmCq(connection->Cq, NDK_CQ_NOTIFY_ANY);
    } while (InterlockedCompareExchange(&connection->WorkState, 0, 1) != 1);
    /* WorkState is 0 now, by the exchange above: a notification from here on queues the item afresh */
    ExReleaseRundownProtection(&g_Nt.Rundown);
}

/* ---- accept and teardown ---------------------------------------------------------------------------------- */

static VOID NtReject(NDK_CONNECTOR* Connector, USHORT Status) {
    NVME_RDMA_CM_REJECT reject;
    reject.RecordFormat = 0;
    reject.Status = Status;
    Connector->Dispatch->NdkReject(Connector, &reject, sizeof(reject));
    NtClose(&Connector->Header, Connector->Dispatch->NdkCloseConnector);
}

/* Accepts Connector as the queue its CM request names, on the target's PD. */
NTSTATUS NtAccept(NDK_CONNECTOR* Connector) {
    NVME_RDMA_CM_REQUEST request;
    NVME_RDMA_CM_ACCEPT accept;
    PNT_CONNECTION connection = NULL;
    ULONG inbound = 0, outbound = 0, length = sizeof(request), i, size;
    KLOCK_QUEUE_HANDLE lock;
    NT_WAIT wait;
    NTSTATUS status;
    PAGED_CODE();
    RtlZeroMemory(&request, sizeof(request));
    status = Connector->Dispatch->NdkGetConnectionData(Connector, &inbound, &outbound, &request, &length);
    if (!NT_SUCCESS(status)) {
        NtClose(&Connector->Header, Connector->Dispatch->NdkCloseConnector);
        return status;
    }
    if (length < 8 || request.RecordFormat != 0) {
        NtLog("nvmeof-target: a CM request of %u bytes, format %u: rejected\n", length, request.RecordFormat);
        NtReject(Connector, length < 8 ? NT_CM_INVALID_LENGTH : NT_CM_INVALID_RECFMT);
        return STATUS_INVALID_NETWORK_RESPONSE;
    }
    if (request.HostSubmissionQueueSize + 1u > NT_MAX_DEPTH || request.HostSubmissionQueueSize == 0) {
        NtLog("nvmeof-target: queue %u asks for %u entries, at most %u: rejected\n", request.QueueId,
              request.HostSubmissionQueueSize + 1u, NT_MAX_DEPTH);
        NtReject(Connector, NT_CM_INVALID_HSQSIZE);
        return STATUS_INVALID_PARAMETER;
    }
    if (request.QueueId > g_Nt.MaxIoQueues) {
        NtReject(Connector, NT_CM_INVALID_QID);
        return STATUS_INVALID_PARAMETER;
    }
    KeAcquireInStackQueuedSpinLock(&g_Nt.Lock, &lock);
    for (i = 0; i < NT_MAX_CONNECTIONS && !g_Nt.Closing; ++i) {
        if (!g_Nt.Connections[i].InUse) {
            connection = &g_Nt.Connections[i];
            connection->InUse = TRUE;
            break;
        }
    }
    KeReleaseInStackQueuedSpinLock(&lock);
    if (connection == NULL) {
        NtReject(Connector, NT_CM_NO_RESOURCES);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    connection->Connector = Connector;
    connection->QueueId = request.QueueId;
    connection->Depth = (USHORT)(request.HostSubmissionQueueSize + 1);
    connection->Failure = STATUS_SUCCESS;
    connection->Disconnected = 0;
    connection->WorkState = 0;
    NtInitWait(&wait);
    status =
        NtFinishCreate(g_Nt.Adapter->Dispatch->NdkCreateCq(g_Nt.Adapter, connection->Depth * 5 + 8, NtCqNotification,
                                                           connection, NULL, NtCreateDone, &wait, &connection->Cq),
                       &wait, (PVOID*)&connection->Cq);
    if (NT_SUCCESS(status)) {
        NtInitWait(&wait);
        status = NtFinishCreate(
            g_Nt.Pd->Dispatch->NdkCreateQp(g_Nt.Pd, connection->Cq, connection->Cq, connection, connection->Depth,
                                           connection->Depth * 4, 1, 1, 0, NtCreateDone, &wait, &connection->Qp),
            &wait, (PVOID*)&connection->Qp);
    }
    RtlZeroMemory(connection->Slots, sizeof(connection->Slots));
    size = NtBuffersSize(connection);
    if (NT_SUCCESS(status)) {
        connection->Buffers = (PUCHAR)ExAllocatePool2(POOL_FLAG_NON_PAGED, size, NT_TAG);
        if (connection->Buffers != NULL)
            connection->BuffersMdl = IoAllocateMdl(connection->Buffers, size, FALSE, FALSE, NULL);
        if (connection->BuffersMdl == NULL) status = STATUS_INSUFFICIENT_RESOURCES;
    }
    if (NT_SUCCESS(status)) {
        MmBuildMdlForNonPagedPool(connection->BuffersMdl);
        NtInitWait(&wait);
        status =
            NtFinishCreate(g_Nt.Pd->Dispatch->NdkCreateMr(g_Nt.Pd, FALSE, NtCreateDone, &wait, &connection->BufferMr),
                           &wait, (PVOID*)&connection->BufferMr);
    }
    if (NT_SUCCESS(status)) {
        NtInitWait(&wait);
        status = NtFinish(connection->BufferMr->Dispatch->NdkRegisterMr(
                              connection->BufferMr, connection->BuffersMdl, size,
                              NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK, NtRequestDone, &wait),
                          &wait);
    }
    if (NT_SUCCESS(status))
        connection->BufferToken = connection->BufferMr->Dispatch->NdkGetLocalTokenFromMr(connection->BufferMr);
    for (i = 0; NT_SUCCESS(status) && i < connection->Depth; ++i) status = NtPostReceive(connection, i);
    if (NT_SUCCESS(status)) {
        RtlZeroMemory(&accept, sizeof(accept));
        accept.ControllerReceiveQueueSize = connection->Depth;
        NtInitWait(&wait);
        /* reads: the host reads nothing of ours; we read its write data, at most 16 at a time */
        status = NtFinish(
            Connector->Dispatch->NdkAccept(Connector, connection->Qp, 0, outbound < 16 ? outbound : 16, &accept,
                                           sizeof(accept), NtDisconnectEvent, connection, NtRequestDone, &wait),
            &wait);
    }
    if (!NT_SUCCESS(status)) {
        NtLog("nvmeof-target: queue %u: accept failed: 0x%08X (%s)\n", request.QueueId, status, NtStatusText(status));
        connection->Failure = status;
        NtTearDownConnection(connection);
        connection->InUse = FALSE;
        return status;
    }
    connection->Accepted = TRUE;
    NtLog("nvmeof-target: queue %u accepted: depth %u, host receives %u, reads to the host up to %u\n",
          connection->QueueId, connection->Depth, request.HostReceiveQueueSize, outbound < 16 ? outbound : 16);
    NtSchedule(connection); /* it arms the CQ; anything already there, a disconnect included, is served */
    return STATUS_SUCCESS;
}

/* Disconnect, the CQ drained, every object closed. The caller frees the slot (InUse) once nothing runs on it. */
VOID NtTearDownConnection(PNT_CONNECTION Connection) {
    NT_WAIT wait;
    NDK_RESULT_EX result;
    PAGED_CODE();
    if (Connection->Accepted) {
        NtInitWait(&wait);
        NtFinish(Connection->Connector->Dispatch->NdkDisconnect(Connection->Connector, NtRequestDone, &wait), &wait);
    }
    if (Connection->Cq != NULL)
        while (Connection->Cq->Dispatch->NdkGetCqResultsEx(Connection->Cq, &result, 1) == 1) {
        }
    NtLog(
        "nvmeof-target: queue %u closed after %u commands (%u RDMA Reads, %u RDMA Writes, %u in the capsule, %u Sends "
        "with Invalidate, %u events held): %s\n",
        Connection->QueueId, Connection->Commands, Connection->ReadsFromHost, Connection->WritesToHost,
        Connection->InCapsule, Connection->SendInvalidates, Connection->HeldEvents,
        NT_SUCCESS(Connection->Failure) ? "the host disconnected" : NtStatusText(Connection->Failure));
    if (Connection->Connector != NULL)
        NtClose(&Connection->Connector->Header, Connection->Connector->Dispatch->NdkCloseConnector);
    if (Connection->Qp != NULL) NtClose(&Connection->Qp->Header, Connection->Qp->Dispatch->NdkCloseQp);
    if (Connection->BufferMr != NULL)
        NtClose(&Connection->BufferMr->Header, Connection->BufferMr->Dispatch->NdkCloseMr);
    if (Connection->Cq != NULL) NtClose(&Connection->Cq->Header, Connection->Cq->Dispatch->NdkCloseCq);
    if (Connection->BuffersMdl != NULL) IoFreeMdl(Connection->BuffersMdl);
    if (Connection->Buffers != NULL) ExFreePoolWithTag(Connection->Buffers, NT_TAG);
    if (Connection->Controller != NULL && Connection->QueueId == 0) {
        /* the admin queue is the association: its I/O queues end with it, as a controller's fatal error would */
        ULONG i;
        Connection->Controller->Lost = TRUE;
        for (i = 0; i < NT_MAX_CONNECTIONS; ++i) {
            PNT_CONNECTION other = &g_Nt.Connections[i];
            if (other == Connection || !other->InUse || !other->Accepted || other->Controller != Connection->Controller)
                continue;
            NtLog("nvmeof-target: controller %u's admin queue is gone: ending its I/O queue %u\n",
                  Connection->Controller->Id, other->QueueId);
            InterlockedExchange(&other->Disconnected, 1);
            NtSchedule(other);
        }
    }
    if (Connection->Controller != NULL) NtReleaseController(Connection->Controller);
    Connection->Connector = NULL;
    Connection->Qp = NULL;
    Connection->BufferMr = NULL;
    Connection->Cq = NULL;
    Connection->BuffersMdl = NULL;
    Connection->Buffers = NULL;
    Connection->Controller = NULL;
    Connection->Accepted = FALSE;
    Connection->Commands = Connection->ReadsFromHost = Connection->WritesToHost = 0;
    Connection->InCapsule = Connection->SendInvalidates = Connection->HeldEvents = 0;
}
