/*++

Module Name:

    transport.c

Abstract:

    smbdlite's connection helpers (issue 19 §4): KEVENT-synchronous wrappers of the NDK calls, buffers with LAMs,
    a connection's PD/CQ/QP and message slots, SMB-Direct-style credits on Send and Receive, and the stash of
    messages that arrive while a Read, Write or registration is waited for.

Environment:

    Kernel mode (softndk kernel layer).

--*/

#include "smbdlite.h"

/* ---- waits, completions, objects -------------------------------------------------------------------- */

UCHAR SdPattern(SIZE_T Offset) {
    return (UCHAR)(Offset * 13 + Offset / 4096 + 1);
}

ULONG SdChecksum(const UCHAR* Data, SIZE_T Length) {
    ULONG hash = 2166136261u;
    for (SIZE_T i = 0; i < Length; ++i) hash = (hash ^ Data[i]) * 16777619u;
    return hash;
}

VOID SdInitWait(PSD_WAIT Wait) {
    KeInitializeEvent(&Wait->Event, NotificationEvent, FALSE);
    Wait->Status = STATUS_PENDING;
    Wait->Object = NULL;
}

VOID SdCreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* Object) {
    PSD_WAIT wait = (PSD_WAIT)Context;
    wait->Status = Status;
    wait->Object = Object;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

VOID SdRequestDone(PVOID Context, NTSTATUS Status) {
    PSD_WAIT wait = (PSD_WAIT)Context;
    wait->Status = Status;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

VOID SdCloseDone(PVOID Context) {
    KeSetEvent(&((PSD_WAIT)Context)->Event, IO_NO_INCREMENT, FALSE);
}

/* Waits for Event, or DriverUnload's stop; STATUS_IO_TIMEOUT after SD_WAIT_MS. */
NTSTATUS SdWaitOrStop(PKEVENT Event) {
    PVOID objects[2];
    LARGE_INTEGER timeout;
    NTSTATUS status;
    objects[0] = Event;
    objects[1] = &g_Sd.Stop;
    timeout.QuadPart = -(LONGLONG)SD_WAIT_MS * 10000;
    status = KeWaitForMultipleObjects(2, objects, WaitAny, Executive, KernelMode, FALSE, &timeout, NULL);
    if (status == STATUS_WAIT_0) return STATUS_SUCCESS;
    return status == STATUS_TIMEOUT ? STATUS_IO_TIMEOUT : STATUS_REQUEST_ABORTED;
}

NTSTATUS SdFinish(NTSTATUS Status, PSD_WAIT Wait) {
    PAGED_CODE();
    if (Status != STATUS_PENDING) return Status;
    KeWaitForSingleObject(&Wait->Event, Executive, KernelMode, FALSE, NULL);
    return Wait->Status;
}

NTSTATUS SdFinishCreate(NTSTATUS Status, PSD_WAIT Wait, PVOID* Object) {
    if (Status == STATUS_PENDING) {
        Status = SdFinish(Status, Wait);
        if (NT_SUCCESS(Status)) *Object = Wait->Object;
    }
    return Status;
}

VOID SdClose(NDK_OBJECT_HEADER* Object, NDK_FN_CLOSE_OBJECT Close) {
    SD_WAIT wait;
    PAGED_CODE();
    SdInitWait(&wait);
    if (Close(Object, SdCloseDone, &wait) == STATUS_PENDING)
        KeWaitForSingleObject(&wait.Event, Executive, KernelMode, FALSE, NULL);
}

VOID SdCloseIgnored(PVOID Context) {
    UNREFERENCED_PARAMETER(Context);
}

VOID SdCqNotification(PVOID Context, NTSTATUS CqStatus) {
    UNREFERENCED_PARAMETER(CqStatus);
    KeSetEvent(&((PSD_CONNECTION)Context)->CqEvent, IO_NO_INCREMENT, FALSE);
}

VOID SdDisconnectEvent(PVOID Context) {
    KeSetEvent(&((PSD_CONNECTION)Context)->Disconnected, IO_NO_INCREMENT, FALSE);
}

NTSTATUS SdOpenAdapter(NET_IFINDEX IfIndex, NDK_ADAPTER** Adapter) {
    NDK_VERSION version = {2, 0};
    NTSTATUS status;
    PAGED_CODE();
    status = g_Sd.Ndk.WskOpenNdkAdapter(g_Sd.WskProvider.Client, version, IfIndex, Adapter);
    if (status == NDIS_STATUS_BAD_VERSION) {
        version.Major = 1;
        status = g_Sd.Ndk.WskOpenNdkAdapter(g_Sd.WskProvider.Client, version, IfIndex, Adapter);
    }
    return status;
}

/* Non-paged pool + MDL, and a LAM when asked. */
NTSTATUS SdAllocate(NDK_ADAPTER* Adapter, SIZE_T Length, PUCHAR* Buffer, PMDL* Mdl, PNDK_LOGICAL_ADDRESS_MAPPING* Lam,
                    PULONG Fbo) {
    SD_WAIT wait;
    ULONG size;
    NTSTATUS status;
    *Buffer = (PUCHAR)ExAllocatePool2(POOL_FLAG_NON_PAGED, Length, SD_TAG);
    if (*Buffer == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    *Mdl = IoAllocateMdl(*Buffer, (ULONG)Length, FALSE, FALSE, NULL);
    if (*Mdl == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    MmBuildMdlForNonPagedPool(*Mdl);
    if (Lam == NULL) return STATUS_SUCCESS;
    size = NDK_LAM_SIZE(ADDRESS_AND_SIZE_TO_SPAN_PAGES(*Buffer, Length));
    *Lam = (PNDK_LOGICAL_ADDRESS_MAPPING)ExAllocatePool2(POOL_FLAG_NON_PAGED, size, SD_TAG);
    if (*Lam == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    SdInitWait(&wait);
    status =
        SdFinish(Adapter->Dispatch->NdkBuildLAM(Adapter, *Mdl, Length, SdRequestDone, &wait, *Lam, &size, Fbo), &wait);
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(*Lam, SD_TAG);
        *Lam = NULL;
    }
    return status;
}

VOID SdFree(NDK_ADAPTER* Adapter, PUCHAR* Buffer, PMDL* Mdl, PNDK_LOGICAL_ADDRESS_MAPPING* Lam) {
    if (Lam != NULL && *Lam != NULL) {
        Adapter->Dispatch->NdkReleaseLAM(Adapter, *Lam);
        ExFreePoolWithTag(*Lam, SD_TAG);
        *Lam = NULL;
    }
    if (*Mdl != NULL) IoFreeMdl(*Mdl);
    *Mdl = NULL;
    if (*Buffer != NULL) ExFreePoolWithTag(*Buffer, SD_TAG);
    *Buffer = NULL;
}

/* PD, CQ and QP of a connection on Adapter; its message slots; SD_RECEIVE_DEPTH receives posted. */
NTSTATUS SdSetUpConnection(PSD_CONNECTION Connection, NDK_ADAPTER* Adapter, NDK_PD* SharedPd) {
    SD_WAIT wait;
    NTSTATUS status;
    ULONG slot;
    PAGED_CODE();
    Connection->Adapter = Adapter;
    if (SharedPd != NULL) {
        Connection->Pd = SharedPd;
        Connection->SharedPd = TRUE;
    } else {
        SdInitWait(&wait);
        status = SdFinishCreate(Adapter->Dispatch->NdkCreatePd(Adapter, SdCreateDone, &wait, &Connection->Pd), &wait,
                                (PVOID*)&Connection->Pd);
        if (!NT_SUCCESS(status)) return status;
    }
    SdInitWait(&wait);
    status =
        SdFinishCreate(Adapter->Dispatch->NdkCreateCq(Adapter, SD_RECEIVE_DEPTH + SD_SEND_DEPTH + 8, SdCqNotification,
                                                      Connection, NULL, SdCreateDone, &wait, &Connection->Cq),
                       &wait, (PVOID*)&Connection->Cq);
    if (!NT_SUCCESS(status)) return status;
    SdInitWait(&wait);
    status = SdFinishCreate(Connection->Pd->Dispatch->NdkCreateQp(Connection->Pd, Connection->Cq, Connection->Cq,
                                                                  Connection, SD_RECEIVE_DEPTH, SD_SEND_DEPTH, 1, 1, 0,
                                                                  SdCreateDone, &wait, &Connection->Qp),
                            &wait, (PVOID*)&Connection->Qp);
    if (!NT_SUCCESS(status)) return status;
    Connection->Pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(Connection->Pd, &Connection->PrivilegedToken);
    status = SdAllocate(Adapter, (SD_RECEIVE_DEPTH + SD_SEND_SLOTS) * SD_SLOT_SIZE, &Connection->Slots,
                        &Connection->SlotsMdl, &Connection->SlotsLam, &Connection->SlotsFbo);
    if (!NT_SUCCESS(status)) return status;
    for (slot = 0; slot < SD_RECEIVE_DEPTH; ++slot) {
        NDK_SGE sge = SdSlotSge(Connection, slot, SD_SLOT_SIZE);
        status = Connection->Qp->Dispatch->NdkReceive(Connection->Qp, (PVOID)(ULONG_PTR)(slot + 1), &sge, 1);
        if (!NT_SUCCESS(status)) return status;
    }
    return STATUS_SUCCESS;
}

NDK_SGE SdSlotSge(PSD_CONNECTION Connection, ULONG Slot, ULONG Length) {
    NDK_SGE sge;
    RtlZeroMemory(&sge, sizeof(sge));
    /* the slots lie in one page, from the LAM's first byte offset on (a small pool block need not start a page) */
    sge.LogicalAddress.QuadPart =
        Connection->SlotsLam->AdapterPageArray[0].QuadPart + Connection->SlotsFbo + Slot * SD_SLOT_SIZE;
    sge.Length = Length;
    sge.MemoryRegionToken = Connection->PrivilegedToken;
    return sge;
}

PSD_MESSAGE SdSlot(PSD_CONNECTION Connection, ULONG Slot) {
    return (PSD_MESSAGE)(Connection->Slots + Slot * SD_SLOT_SIZE);
}

/* The next completion of the connection's CQ: arm and wait when it is empty. */
NTSTATUS SdNextResult(PSD_CONNECTION Connection, PNDK_RESULT_EX Result) {
    PAGED_CODE();
    for (;;) {
        NTSTATUS status;
        if (Connection->Cq->Dispatch->NdkGetCqResultsEx(Connection->Cq, Result, 1) == 1) return STATUS_SUCCESS;
        KeClearEvent(&Connection->CqEvent);
        Connection->Cq->Dispatch->NdkArmCq(Connection->Cq, NDK_CQ_NOTIFY_ANY);
        if (Connection->Cq->Dispatch->NdkGetCqResultsEx(Connection->Cq, Result, 1) == 1) return STATUS_SUCCESS;
        status = SdWaitOrStop(&Connection->CqEvent);
        if (!NT_SUCCESS(status)) return status;
    }
}

BOOLEAN SdIsReceive(const NDK_RESULT_EX* Result) {
    return Result->Type == NdkOperationTypeReceive || Result->Type == NdkOperationTypeReceiveAndInvalidate;
}

/* The receive slot back to the QP: one more credit to grant in our next message. */
NTSTATUS SdRepost(PSD_CONNECTION Connection, ULONG Slot) {
    NDK_SGE sge = SdSlotSge(Connection, Slot, SD_SLOT_SIZE);
    NTSTATUS status = Connection->Qp->Dispatch->NdkReceive(Connection->Qp, (PVOID)(ULONG_PTR)(Slot + 1), &sge, 1);
    if (NT_SUCCESS(status)) ++Connection->GrantPending;
    return status;
}

/* Sends Message with one of our credits, granting what we reposted; NdkSendAndInvalidate when Token != 0. The
 * Send's completion is reaped by whoever polls next (a send slot is reused only after SD_SEND_SLOTS more). */
NTSTATUS SdSend(PSD_CONNECTION Connection, PSD_MESSAGE Message, UINT32 InvalidateToken) {
    ULONG slot = SD_SEND_SLOT + Connection->NextSendSlot++ % SD_SEND_SLOTS;
    NDK_SGE sge = SdSlotSge(Connection, slot, sizeof(SD_MESSAGE));
    if (Connection->SendCredits == 0) return STATUS_DEVICE_BUSY; /* the caller waits for a grant first */
    --Connection->SendCredits;
    Message->CreditsGranted = (USHORT)Connection->GrantPending;
    Message->CreditsRequested = SD_RECEIVE_DEPTH;
    Connection->GrantPending = 0;
    RtlCopyMemory(SdSlot(Connection, slot), Message, sizeof(*Message));
    if (InvalidateToken != 0)
        return Connection->Qp->Dispatch->NdkSendAndInvalidate(Connection->Qp, NULL, &sge, 1, 0, InvalidateToken);
    return Connection->Qp->Dispatch->NdkSend(Connection->Qp, NULL, &sge, 1, 0);
}

/* A receive completion: the message copied out, the peer's grant counted, the slot reposted. */
NTSTATUS SdTakeReceive(PSD_CONNECTION Connection, const NDK_RESULT_EX* Result, PSD_MESSAGE Message) {
    ULONG slot = (ULONG)(ULONG_PTR)Result->RequestContext - 1;
    if (slot >= SD_RECEIVE_DEPTH || Result->BytesTransferred < sizeof(SD_MESSAGE)) return SdProtocolError(__LINE__);
    RtlCopyMemory(Message, SdSlot(Connection, slot), sizeof(*Message));
    /* the peer cannot grant more receives than it has: more is a protocol error */
    if (Connection->SendCredits + Message->CreditsGranted > SD_RECEIVE_DEPTH) return SdProtocolError(__LINE__);
    Connection->SendCredits += Message->CreditsGranted;
    return SdRepost(Connection, slot);
}

/* The next message received (a stashed one first), and its completion in *Received when asked. Initiator
 * completions met on the way must have succeeded. */
NTSTATUS SdReceive(PSD_CONNECTION Connection, PSD_MESSAGE Message, PNDK_RESULT_EX Received) {
    NDK_RESULT_EX result;
    PAGED_CODE();
    if (Connection->StashCount > 0) {
        ULONG index = Connection->StashHead;
        *Message = Connection->Stash[index];
        if (Received != NULL) *Received = Connection->StashResult[index];
        Connection->StashHead = (index + 1) % SD_RECEIVE_DEPTH;
        --Connection->StashCount;
        return STATUS_SUCCESS;
    }
    for (;;) {
        NTSTATUS status = SdNextResult(Connection, &result);
        if (!NT_SUCCESS(status)) return status;
        if (!NT_SUCCESS(result.Status)) return result.Status;
        if (!SdIsReceive(&result)) continue; /* a Send, Read or Write of ours: success is all there is to see */
        if (Received != NULL) *Received = result;
        return SdTakeReceive(Connection, &result, Message);
    }
}

/* Waits for the completion of the initiator request Context; messages that arrive meanwhile are stashed (the
 * peer pipelines requests: a Read may finish after the next request came). */
NTSTATUS SdWaitInitiator(PSD_CONNECTION Connection, PVOID Context) {
    NDK_RESULT_EX result;
    for (;;) {
        NTSTATUS status = SdNextResult(Connection, &result);
        if (!NT_SUCCESS(status)) return status;
        if (!NT_SUCCESS(result.Status)) return result.Status;
        if (SdIsReceive(&result)) {
            ULONG index = (Connection->StashHead + Connection->StashCount) % SD_RECEIVE_DEPTH;
            if (Connection->StashCount == SD_RECEIVE_DEPTH) return SdProtocolError(__LINE__);
            status = SdTakeReceive(Connection, &result, &Connection->Stash[index]);
            if (!NT_SUCCESS(status)) return status;
            Connection->StashResult[index] = result;
            ++Connection->StashCount;
            continue;
        }
        if (result.RequestContext == Context) return STATUS_SUCCESS;
    }
}

VOID SdTearDownConnection(PSD_CONNECTION Connection, BOOLEAN CloseAdapter) {
    SD_WAIT wait;
    PAGED_CODE();
    if (Connection->Connector != NULL && Connection->Connected) {
        SdInitWait(&wait);
        SdFinish(Connection->Connector->Dispatch->NdkDisconnect(Connection->Connector, SdRequestDone, &wait), &wait);
        Connection->Connected = FALSE;
    }
    if (Connection->Connector != NULL)
        SdClose(&Connection->Connector->Header, Connection->Connector->Dispatch->NdkCloseConnector);
    if (Connection->Qp != NULL) SdClose(&Connection->Qp->Header, Connection->Qp->Dispatch->NdkCloseQp);
    if (Connection->StoreMr != NULL) SdClose(&Connection->StoreMr->Header, Connection->StoreMr->Dispatch->NdkCloseMr);
    if (Connection->Cq != NULL) SdClose(&Connection->Cq->Header, Connection->Cq->Dispatch->NdkCloseCq);
    if (Connection->Adapter != NULL)
        SdFree(Connection->Adapter, &Connection->Slots, &Connection->SlotsMdl, &Connection->SlotsLam);
    if (Connection->Pd != NULL && !Connection->SharedPd)
        SdClose(&Connection->Pd->Header, Connection->Pd->Dispatch->NdkClosePd);
    if (CloseAdapter && Connection->Adapter != NULL)
        g_Sd.Ndk.WskCloseNdkAdapter(g_Sd.WskProvider.Client, Connection->Adapter);
    Connection->Connector = NULL;
    Connection->Qp = NULL;
    Connection->StoreMr = NULL;
    Connection->Cq = NULL;
    Connection->Pd = NULL;
    Connection->Adapter = NULL;
}
