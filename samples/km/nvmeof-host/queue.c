/*++

Module Name:

    queue.c

Abstract:

    One NVMe-oF queue of nvmeof-host: its RDMA connection (the CM private data of the RDMA transport binding), its
    command capsules and response slots, one fast-register MR per command, and submission and completion.

    A command with data gets its slice of the queue's data buffer fast-registered on its own MR, and the keyed
    SGL names that registration. When the queue asks the target to invalidate (SGL subtype "invalidate"), the
    response arrives as a Receive with Invalidate of exactly that token; otherwise the host invalidates the MR
    itself after the response. A slot is free again only when its Send completed, its response came and its MR
    is invalid. Writes small enough for the target's in-capsule data go inside the capsule, without an MR.

Environment:

    Kernel mode (softndk kernel layer). Every function here runs at PASSIVE_LEVEL in the queue owner's thread.

--*/

#include "nvmeof_host.h"

/* ---- waits and objects ----------------------------------------------------------------------------------- */

PCSTR NhStatusText(NTSTATUS Status) {
    switch (Status) {
        case STATUS_SUCCESS:
            return "success";
        case STATUS_PENDING:
            return "pending";
        case STATUS_CANCELLED:
            return "cancelled (flushed)";
        case STATUS_IO_TIMEOUT:
            return "timed out";
        case STATUS_REQUEST_ABORTED:
            return "aborted by unload";
        case STATUS_CONNECTION_REFUSED:
            return "connection refused";
        case STATUS_CONNECTION_RESET:
            return "connection reset";
        case STATUS_CONNECTION_ABORTED:
            return "connection aborted";
        case STATUS_CONNECTION_DISCONNECTED:
            return "disconnected";
        case STATUS_INVALID_NETWORK_RESPONSE:
            return "the target broke the protocol";
        case STATUS_INSUFFICIENT_RESOURCES:
            return "out of resources";
        case STATUS_INVALID_PARAMETER:
            return "invalid parameter";
        case STATUS_DATA_ERROR:
            return "data differs from what was written";
        case STATUS_DEVICE_PROTOCOL_ERROR:
            return "the controller answered with an NVMe error";
        case STATUS_DEVICE_NOT_READY:
            return "the controller did not become ready";
        case STATUS_DEVICE_BUSY:
            return "no free command slot";
        case STATUS_NOT_FOUND:
            return "not found";
        case STATUS_ACCESS_VIOLATION:
            return "access violation";
        case STATUS_INVALID_DEVICE_REQUEST:
            return "invalid request";
        default:
            return "see ntstatus.h";
    }
}

VOID NhInitWait(PNH_WAIT Wait) {
    KeInitializeEvent(&Wait->Event, NotificationEvent, FALSE);
    Wait->Status = STATUS_PENDING;
    Wait->Object = NULL;
}

VOID NhCreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* Object) {
    PNH_WAIT wait = (PNH_WAIT)Context;
    wait->Status = Status;
    wait->Object = Object;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

VOID NhRequestDone(PVOID Context, NTSTATUS Status) {
    PNH_WAIT wait = (PNH_WAIT)Context;
    wait->Status = Status;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

static VOID NhCloseDone(PVOID Context) {
    KeSetEvent(&((PNH_WAIT)Context)->Event, IO_NO_INCREMENT, FALSE);
}

/* Event, or DriverUnload's stop; STATUS_IO_TIMEOUT after Milliseconds. */
NTSTATUS NhWaitOrStop(PKEVENT Event, ULONG Milliseconds) {
    PVOID objects[2];
    LARGE_INTEGER timeout;
    NTSTATUS status;
    objects[0] = Event;
    objects[1] = &g_Nh.Stop;
    timeout.QuadPart = -(LONGLONG)Milliseconds * 10000;
    status = KeWaitForMultipleObjects(2, objects, WaitAny, Executive, KernelMode, FALSE, &timeout, NULL);
    if (status == STATUS_WAIT_0) return STATUS_SUCCESS;
    return status == STATUS_TIMEOUT ? STATUS_IO_TIMEOUT : STATUS_REQUEST_ABORTED;
}

NTSTATUS NhFinish(NTSTATUS Status, PNH_WAIT Wait) {
    PAGED_CODE();
    if (Status != STATUS_PENDING) return Status;
    KeWaitForSingleObject(&Wait->Event, Executive, KernelMode, FALSE, NULL);
    return Wait->Status;
}

NTSTATUS NhFinishCreate(NTSTATUS Status, PNH_WAIT Wait, PVOID* Object) {
    if (Status == STATUS_PENDING) {
        Status = NhFinish(Status, Wait);
        if (NT_SUCCESS(Status)) *Object = Wait->Object;
    }
    return Status;
}

VOID NhClose(NDK_OBJECT_HEADER* Object, NDK_FN_CLOSE_OBJECT Close) {
    NH_WAIT wait;
    PAGED_CODE();
    NhInitWait(&wait);
    if (Close(Object, NhCloseDone, &wait) == STATUS_PENDING)
        KeWaitForSingleObject(&wait.Event, Executive, KernelMode, FALSE, NULL);
}

static VOID NhCqNotification(PVOID Context, NTSTATUS CqStatus) {
    UNREFERENCED_PARAMETER(CqStatus);
    KeSetEvent(&((PNH_QUEUE)Context)->CqEvent, IO_NO_INCREMENT, FALSE);
}

static VOID NhDisconnectEvent(PVOID Context) {
    KeSetEvent(&((PNH_QUEUE)Context)->Disconnected, IO_NO_INCREMENT, FALSE);
}

/* Non-paged pool, its MDL and a LAM on the host's adapter. */
NTSTATUS NhAllocate(SIZE_T Length, PUCHAR* Buffer, PMDL* Mdl, PNDK_LOGICAL_ADDRESS_MAPPING* Lam, PULONG Fbo) {
    NH_WAIT wait;
    ULONG size;
    NTSTATUS status;
    *Buffer = (PUCHAR)ExAllocatePool2(POOL_FLAG_NON_PAGED, Length, NH_TAG);
    if (*Buffer == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    *Mdl = IoAllocateMdl(*Buffer, (ULONG)Length, FALSE, FALSE, NULL);
    if (*Mdl == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    MmBuildMdlForNonPagedPool(*Mdl);
    size = NDK_LAM_SIZE(ADDRESS_AND_SIZE_TO_SPAN_PAGES(*Buffer, Length));
    *Lam = (PNDK_LOGICAL_ADDRESS_MAPPING)ExAllocatePool2(POOL_FLAG_NON_PAGED, size, NH_TAG);
    if (*Lam == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    NhInitWait(&wait);
    status = NhFinish(
        g_Nh.Adapter->Dispatch->NdkBuildLAM(g_Nh.Adapter, *Mdl, Length, NhRequestDone, &wait, *Lam, &size, Fbo), &wait);
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(*Lam, NH_TAG);
        *Lam = NULL;
    }
    return status;
}

VOID NhFree(PUCHAR* Buffer, PMDL* Mdl, PNDK_LOGICAL_ADDRESS_MAPPING* Lam) {
    if (*Lam != NULL) {
        g_Nh.Adapter->Dispatch->NdkReleaseLAM(g_Nh.Adapter, *Lam);
        ExFreePoolWithTag(*Lam, NH_TAG);
        *Lam = NULL;
    }
    if (*Mdl != NULL) IoFreeMdl(*Mdl);
    *Mdl = NULL;
    if (*Buffer != NULL) ExFreePoolWithTag(*Buffer, NH_TAG);
    *Buffer = NULL;
}

/* A local SGE over [Offset, Offset + Length) of a buffer with a LAM (the privileged token covers it). */
static NDK_SGE NhSge(PNH_QUEUE Queue, PNDK_LOGICAL_ADDRESS_MAPPING Lam, ULONG Fbo, ULONG Offset, ULONG Length) {
    NDK_SGE sge;
    ULONG at = Fbo + Offset;
    RtlZeroMemory(&sge, sizeof(sge));
    sge.LogicalAddress.QuadPart = Lam->AdapterPageArray[at / PAGE_SIZE].QuadPart + at % PAGE_SIZE;
    sge.Length = Length;
    sge.MemoryRegionToken = Queue->PrivilegedToken;
    return sge;
}

static ULONG NhSliceSize(PNH_QUEUE Queue) {
    return Queue->Id == 0 ? NVME_IDENTIFY_SIZE : NH_MAX_TRANSFER;
}

PUCHAR NhSlotData(PNH_QUEUE Queue, ULONG Slot) {
    return Queue->Data + (SIZE_T)Slot * NhSliceSize(Queue);
}

static NTSTATUS NhPostResponseSlot(PNH_QUEUE Queue, ULONG Slot) {
    ULONG offset = Queue->Depth * Queue->CapsuleSize + Slot * NH_RESPONSE_SLOT;
    NDK_SGE sge = NhSge(Queue, Queue->CapsulesLam, Queue->CapsulesFbo, offset, NH_RESPONSE_SLOT);
    return Queue->Qp->Dispatch->NdkReceive(Queue->Qp, (PVOID)(ULONG_PTR)(Slot + 1), &sge, 1);
}

/* ---- connection ------------------------------------------------------------------------------------------- */

/* CQ, QP, capsules, data slices, an FRMR per slot, receives posted; then the connection, whose CM request says
 * which queue this is and how deep (RDMA transport binding), and whose accept gives the target's depth. */
NTSTATUS NhConnectQueue(PNH_QUEUE Queue) {
    NH_WAIT wait;
    NVME_RDMA_CM_REQUEST request;
    NVME_RDMA_CM_ACCEPT accept;
    SOCKADDR_IN source, destination;
    ULONG inbound = 0, outbound = 0, length = sizeof(accept), i;
    NTSTATUS status;
    PAGED_CODE();
    Queue->Adapter = g_Nh.Adapter;
    Queue->Pd = g_Nh.Pd;
    Queue->CapsuleSize = sizeof(NVME_COMMAND);
    NhInitWait(&wait);
    status = NhFinishCreate(g_Nh.Adapter->Dispatch->NdkCreateCq(g_Nh.Adapter, Queue->Depth * 4 + 8, NhCqNotification,
                                                                Queue, NULL, NhCreateDone, &wait, &Queue->Cq),
                            &wait, (PVOID*)&Queue->Cq);
    if (!NT_SUCCESS(status)) return status;
    /* per command up to three initiator requests: fast-register, Send, Invalidate */
    NhInitWait(&wait);
    status =
        NhFinishCreate(Queue->Pd->Dispatch->NdkCreateQp(Queue->Pd, Queue->Cq, Queue->Cq, Queue, Queue->Depth,
                                                        Queue->Depth * 3, 1, 2, 0, NhCreateDone, &wait, &Queue->Qp),
                       &wait, (PVOID*)&Queue->Qp);
    if (!NT_SUCCESS(status)) return status;
    Queue->Pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(Queue->Pd, &Queue->PrivilegedToken);
    status = NhAllocate(Queue->Depth * (Queue->CapsuleSize + NH_RESPONSE_SLOT), &Queue->Capsules, &Queue->CapsulesMdl,
                        &Queue->CapsulesLam, &Queue->CapsulesFbo);
    if (NT_SUCCESS(status))
        status = NhAllocate((SIZE_T)Queue->Depth * NhSliceSize(Queue), &Queue->Data, &Queue->DataMdl, &Queue->DataLam,
                            &Queue->DataFbo);
    for (i = 0; NT_SUCCESS(status) && i < Queue->Depth; ++i) {
        NDK_MR** mr = &Queue->Commands[i].Mr;
        NhInitWait(&wait);
        status = NhFinishCreate(Queue->Pd->Dispatch->NdkCreateMr(Queue->Pd, TRUE, NhCreateDone, &wait, mr), &wait,
                                (PVOID*)mr);
        if (!NT_SUCCESS(status)) break;
        NhInitWait(&wait);
        status = NhFinish((*mr)->Dispatch->NdkInitializeFastRegisterMr(*mr, NhSliceSize(Queue) / PAGE_SIZE + 1, TRUE,
                                                                       NhRequestDone, &wait),
                          &wait);
    }
    for (i = 0; NT_SUCCESS(status) && i < Queue->Depth; ++i) status = NhPostResponseSlot(Queue, i);
    if (!NT_SUCCESS(status)) return status;

    NhInitWait(&wait);
    status =
        NhFinishCreate(g_Nh.Adapter->Dispatch->NdkCreateConnector(g_Nh.Adapter, NhCreateDone, &wait, &Queue->Connector),
                       &wait, (PVOID*)&Queue->Connector);
    if (!NT_SUCCESS(status)) return status;
    RtlZeroMemory(&request, sizeof(request));
    request.QueueId = Queue->Id;
    request.HostReceiveQueueSize = Queue->Depth;
    request.HostSubmissionQueueSize = (USHORT)(Queue->Depth - 1);
    request.ControllerId = Queue->Id == 0 ? 0xFFFF : g_Nh.ControllerId;
    RtlZeroMemory(&source, sizeof(source));
    source.sin_family = AF_INET;
    source.sin_addr = g_Nh.LocalAddress;
    RtlZeroMemory(&destination, sizeof(destination));
    destination.sin_family = AF_INET;
    destination.sin_port = RtlUshortByteSwap(g_Nh.Port);
    destination.sin_addr = g_Nh.Address;
    /* IRD 16: the target RDMA Reads write data and the Connect data from us; ORD 0: we read nothing */
    NhInitWait(&wait);
    status = NhFinish(
        Queue->Connector->Dispatch->NdkConnect(Queue->Connector, Queue->Qp, (CONST PSOCKADDR)&source, sizeof(source),
                                               (CONST PSOCKADDR)&destination, sizeof(destination), 16, 0, &request,
                                               sizeof(request), NhRequestDone, &wait),
        &wait);
    if (!NT_SUCCESS(status)) {
        NhLog("nvmeof-host: queue %u: connect to port %u: 0x%08X (%s)\n", Queue->Id, g_Nh.Port, status,
              NhStatusText(status));
        return status;
    }
    RtlZeroMemory(&accept, sizeof(accept));
    status = Queue->Connector->Dispatch->NdkGetConnectionData(Queue->Connector, &inbound, &outbound, &accept, &length);
    if (!NT_SUCCESS(status)) return status;
    if (length < 4 || accept.RecordFormat != 0 || accept.ControllerReceiveQueueSize == 0) {
        NhLog("nvmeof-host: queue %u: the target's CM accept has %u bytes, format %u, depth %u\n", Queue->Id, length,
              accept.RecordFormat, accept.ControllerReceiveQueueSize);
        return NhProtocolError(__LINE__);
    }
    Queue->TargetDepth = accept.ControllerReceiveQueueSize;
    NhInitWait(&wait);
    status = NhFinish(Queue->Connector->Dispatch->NdkCompleteConnect(Queue->Connector, NhDisconnectEvent, Queue,
                                                                     NhRequestDone, &wait),
                      &wait);
    if (!NT_SUCCESS(status)) return status;
    Queue->Connected = TRUE;
    NhLog("nvmeof-host: queue %u connected: depth %u, the target takes %u, IRD %u ORD %u\n", Queue->Id, Queue->Depth,
          Queue->TargetDepth, inbound, outbound);
    return STATUS_SUCCESS;
}

/* ---- submission and completion ---------------------------------------------------------------------------- */

/* The slot NhSubmit will take next (it takes the lowest free one), or -1 when the queue is full. */
/* A queue of Depth entries holds Depth - 1 commands (a full circular queue keeps one entry empty), and the target
 * takes at most TargetDepth capsules at a time. */
static ULONG NhSlotLimit(PNH_QUEUE Queue) {
    return (ULONG)Queue->Depth - 1 < Queue->TargetDepth ? (ULONG)Queue->Depth - 1 : Queue->TargetDepth;
}

LONG NhNextFreeSlot(PNH_QUEUE Queue) {
    ULONG i;
    for (i = 0; i < NhSlotLimit(Queue); ++i)
        if (!Queue->Commands[i].Busy) return (LONG)i;
    return -1;
}

/* Sends Command in a free slot. Its data is the slot's slice: in the capsule when it fits the target's in-capsule
 * size, else behind a keyed SGL over a fresh fast registration. */
NTSTATUS NhSubmit(PNH_QUEUE Queue, NVME_COMMAND* Command, NH_DATA Direction, ULONG Length, ULONG64 Tag, PULONG Slot) {
    NH_COMMAND* slot = NULL;
    NDK_SGE sges[2];
    ULONG i, nsge = 1;
    NTSTATUS status;
    for (i = 0; i < NhSlotLimit(Queue); ++i) {
        if (!Queue->Commands[i].Busy) {
            slot = &Queue->Commands[i];
            break;
        }
    }
    if (slot == NULL) return STATUS_DEVICE_BUSY;
    if (Length > NhSliceSize(Queue)) return STATUS_INVALID_PARAMETER;
    slot->SendDone = slot->ResponseDone = slot->Registered = slot->RemoteInvalidate = FALSE;
    slot->Length = Length;
    slot->Tag = Tag;
    Command->CommandId = (USHORT)i;
    Command->Flags |= NVME_FLAG_SGL;
    RtlZeroMemory(&Command->Data, sizeof(Command->Data));
    if (Direction == NhNoData || Length == 0) {
        Command->Data.Keyed.Type = NVME_SGL_KEYED_ADDRESS; /* a null keyed SGL: no data */
    } else if (Direction == NhToTarget && Length <= Queue->InCapsuleBytes) {
        Command->Data.InCapsule.Offset = 0;
        Command->Data.InCapsule.Length = Length;
        Command->Data.InCapsule.Type = NVME_SGL_INCAPSULE;
        sges[1] = NhSge(Queue, Queue->DataLam, Queue->DataFbo, i * NhSliceSize(Queue), Length);
        nsge = 2;
        ++Queue->InCapsuleWrites;
    } else {
        ULONG at = Queue->DataFbo + i * NhSliceSize(Queue);
        ULONG pages = (at % PAGE_SIZE + Length + PAGE_SIZE - 1) / PAGE_SIZE;
        ULONG access = Direction == NhFromTarget ? NDK_OP_FLAG_ALLOW_REMOTE_WRITE : NDK_OP_FLAG_ALLOW_REMOTE_READ;
        status = Queue->Qp->Dispatch->NdkFastRegister(Queue->Qp, slot, slot->Mr, pages,
                                                      &Queue->DataLam->AdapterPageArray[at / PAGE_SIZE], at % PAGE_SIZE,
                                                      Length, NhSlotData(Queue, i), access);
        if (!NT_SUCCESS(status)) return status;
        slot->Registered = TRUE;
        slot->Token = slot->Mr->Dispatch->NdkGetRemoteTokenFromMr(slot->Mr); /* valid once posted (FR-19) */
        slot->RemoteInvalidate = Queue->RemoteInvalidate;
        ++Queue->KeyedCommands;
        NvmeSetKeyedSgl(&Command->Data.Keyed, (ULONG64)(ULONG_PTR)NhSlotData(Queue, i), Length, slot->Token,
                        slot->RemoteInvalidate);
    }
    RtlCopyMemory(Queue->Capsules + i * Queue->CapsuleSize, Command, sizeof(*Command));
    sges[0] = NhSge(Queue, Queue->CapsulesLam, Queue->CapsulesFbo, i * Queue->CapsuleSize, sizeof(*Command));
    status = Queue->Qp->Dispatch->NdkSend(Queue->Qp, (PVOID)((ULONG_PTR)slot | 1), sges, nsge, 0);
    if (!NT_SUCCESS(status)) return status;
    slot->Busy = TRUE;
    ++Queue->InFlight;
    *Slot = i;
    return STATUS_SUCCESS;
}

/* One completion: its slot's progress. A slot whose Send, response and invalidation are all done is returned in
 * *Finished (else NH_MAX_DEPTH). */
static NTSTATUS NhTakeResult(PNH_QUEUE Queue, const NDK_RESULT_EX* Result, PULONG Finished) {
    NH_COMMAND* slot;
    *Finished = NH_MAX_DEPTH;
    if (Result->Type == NdkOperationTypeReceive || Result->Type == NdkOperationTypeReceiveAndInvalidate) {
        ULONG index = (ULONG)(ULONG_PTR)Result->RequestContext - 1;
        NVME_COMPLETION response;
        if (!NT_SUCCESS(Result->Status)) return Result->Status;
        if (index >= Queue->Depth || Result->BytesTransferred != sizeof(NVME_COMPLETION)) {
            NhLog("nvmeof-host: queue %u: a response of %u bytes\n", Queue->Id, Result->BytesTransferred);
            return NhProtocolError(__LINE__);
        }
        RtlCopyMemory(&response, Queue->Capsules + Queue->Depth * Queue->CapsuleSize + index * NH_RESPONSE_SLOT,
                      sizeof(response));
        if (!NT_SUCCESS(NhPostResponseSlot(Queue, index))) return STATUS_INSUFFICIENT_RESOURCES;
        if (response.CommandId >= Queue->Depth || !Queue->Commands[response.CommandId].Busy ||
            Queue->Commands[response.CommandId].ResponseDone) {
            NhLog("nvmeof-host: queue %u: a response for command %u, which is not in flight\n", Queue->Id,
                  response.CommandId);
            return NhProtocolError(__LINE__);
        }
        slot = &Queue->Commands[response.CommandId];
        slot->Response = response;
        slot->ResponseDone = TRUE;
        if (Result->Type == NdkOperationTypeReceiveAndInvalidate) {
            /* the target invalidated a token: it must be this command's, and only when we asked */
            if (!slot->Registered || !slot->RemoteInvalidate ||
                (UINT32)Result->TypeSpecificCompletionOutput != slot->Token) {
                NhLog("nvmeof-host: queue %u: command %u's response invalidated token 0x%08X, ours is 0x%08X\n",
                      Queue->Id, response.CommandId, (UINT32)Result->TypeSpecificCompletionOutput, slot->Token);
                return NhProtocolError(__LINE__);
            }
            slot->Registered = FALSE;
            ++Queue->RemoteInvalidations;
        } else if (slot->Registered) {
            /* local invalidation: the MR is ours to invalidate before the slot is reused; a target that was asked
             * to invalidate and did not is counted (the NVMe-oF RDMA binding lets it, the report says so) */
            NTSTATUS status;
            Queue->RemoteNotHonoured += slot->RemoteInvalidate;
            ++Queue->LocalInvalidations;
            status = Queue->Qp->Dispatch->NdkInvalidate(Queue->Qp, (PVOID)((ULONG_PTR)slot | 2), &slot->Mr->Header, 0);
            if (!NT_SUCCESS(status)) return status;
        }
    } else {
        ULONG_PTR context = (ULONG_PTR)Result->RequestContext;
        slot = (NH_COMMAND*)(context & ~(ULONG_PTR)3);
        if (slot < &Queue->Commands[0] || slot >= &Queue->Commands[Queue->Depth]) return NhProtocolError(__LINE__);
        if (!NT_SUCCESS(Result->Status)) {
            NhLog("nvmeof-host: queue %u: a %s failed: 0x%08X (%s)\n", Queue->Id,
                  Result->Type == NdkOperationTypeSend           ? "Send"
                  : Result->Type == NdkOperationTypeFastRegister ? "fast-register"
                                                                 : "local invalidate",
                  Result->Status, NhStatusText(Result->Status));
            return Result->Status;
        }
        if (Result->Type == NdkOperationTypeSend) slot->SendDone = TRUE;
        if (Result->Type == NdkOperationTypeInvalidate) slot->Registered = FALSE;
        /* a fast-register's success needs nothing: the Send behind it went after it */
    }
    if (slot->Busy && slot->SendDone && slot->ResponseDone && !slot->Registered) {
        *Finished = (ULONG)(slot - Queue->Commands);
    }
    return STATUS_SUCCESS;
}

/* The next finished command of the queue, waiting up to Milliseconds. Its response is in Commands[*Slot]. */
NTSTATUS NhReap(PNH_QUEUE Queue, PULONG Slot, ULONG Milliseconds) {
    NDK_RESULT_EX result;
    NTSTATUS status;
    PAGED_CODE();
    for (;;) {
        if (Queue->Cq->Dispatch->NdkGetCqResultsEx(Queue->Cq, &result, 1) == 0) {
            KeClearEvent(&Queue->CqEvent);
            Queue->Cq->Dispatch->NdkArmCq(Queue->Cq, NDK_CQ_NOTIFY_ANY);
            if (Queue->Cq->Dispatch->NdkGetCqResultsEx(Queue->Cq, &result, 1) == 0) {
                status = NhWaitOrStop(&Queue->CqEvent, Milliseconds);
                if (!NT_SUCCESS(status)) return status;
                continue;
            }
        }
        status = NhTakeResult(Queue, &result, Slot);
        if (!NT_SUCCESS(status)) return status;
        if (*Slot != NH_MAX_DEPTH) return STATUS_SUCCESS;
    }
}

VOID NhRelease(PNH_QUEUE Queue, ULONG Slot) {
    Queue->Commands[Slot].Busy = FALSE;
    --Queue->InFlight;
}

/* One command, start to end; its NVMe status in words when it failed. */
NTSTATUS NhExecute(PNH_QUEUE Queue, NVME_COMMAND* Command, NH_DATA Direction, ULONG Length, NVME_COMPLETION* Response) {
    ULONG slot, finished;
    NTSTATUS status = NhSubmit(Queue, Command, Direction, Length, 0, &slot);
    if (!NT_SUCCESS(status)) return status;
    for (;;) {
        status = NhReap(Queue, &finished, NH_WAIT_MS);
        if (!NT_SUCCESS(status)) return status;
        NhRelease(Queue, finished);
        if (finished == slot) break;
    }
    *Response = Queue->Commands[slot].Response;
    if (!NVME_STATUS_OK(Response->Status)) {
        NhLog("nvmeof-host: queue %u: opcode 0x%02X answered NVMe status type %u code 0x%02X\n", Queue->Id,
              Command->Opcode, NVME_STATUS_TYPE(Response->Status), NVME_STATUS_CODE(Response->Status));
        return STATUS_DEVICE_PROTOCOL_ERROR;
    }
    return STATUS_SUCCESS;
}

/* Teardown with commands in flight: disconnect, then every request still posted comes back, most of them flushed;
 * the CQ is drained until it stays empty for 2 s. The objects are closed later, by NhTearDownQueue. */
NTSTATUS NhFlushInFlight(PNH_QUEUE Queue) {
    NH_WAIT wait;
    NDK_RESULT_EX result;
    ULONG completed = 0, i;
    NTSTATUS status;
    PAGED_CODE();
    NhInitWait(&wait);
    status = NhFinish(Queue->Connector->Dispatch->NdkDisconnect(Queue->Connector, NhRequestDone, &wait), &wait);
    Queue->Connected = FALSE;
    NhLog("nvmeof-host: queue %u: disconnected with %u commands in flight: 0x%08X (%s)\n", Queue->Id, Queue->InFlight,
          status, NhStatusText(status));
    /* each posted receive and each unfinished Send comes back; count them until the CQ stays empty */
    for (;;) {
        if (Queue->Cq->Dispatch->NdkGetCqResultsEx(Queue->Cq, &result, 1) == 0) {
            KeClearEvent(&Queue->CqEvent);
            Queue->Cq->Dispatch->NdkArmCq(Queue->Cq, NDK_CQ_NOTIFY_ANY);
            if (Queue->Cq->Dispatch->NdkGetCqResultsEx(Queue->Cq, &result, 1) == 0) {
                if (!NT_SUCCESS(NhWaitOrStop(&Queue->CqEvent, 2000))) break;
                continue;
            }
        }
        if (result.Status == STATUS_CANCELLED)
            ++Queue->Flushed;
        else
            ++completed;
    }
    for (i = 0; i < Queue->Depth; ++i) Queue->Commands[i].Busy = FALSE;
    Queue->InFlight = 0;
    NhLog("nvmeof-host: queue %u: after the disconnect %u requests came back flushed and %u completed\n", Queue->Id,
          Queue->Flushed, completed);
    return status;
}

VOID NhTearDownQueue(PNH_QUEUE Queue) {
    NH_WAIT wait;
    ULONG i;
    PAGED_CODE();
    if (Queue->Connector != NULL && Queue->Connected) {
        NhInitWait(&wait);
        NhFinish(Queue->Connector->Dispatch->NdkDisconnect(Queue->Connector, NhRequestDone, &wait), &wait);
        Queue->Connected = FALSE;
    }
    if (Queue->Connector != NULL) NhClose(&Queue->Connector->Header, Queue->Connector->Dispatch->NdkCloseConnector);
    if (Queue->Qp != NULL) NhClose(&Queue->Qp->Header, Queue->Qp->Dispatch->NdkCloseQp);
    for (i = 0; i < NH_MAX_DEPTH; ++i) {
        if (Queue->Commands[i].Mr != NULL)
            NhClose(&Queue->Commands[i].Mr->Header, Queue->Commands[i].Mr->Dispatch->NdkCloseMr);
        Queue->Commands[i].Mr = NULL;
    }
    if (Queue->Cq != NULL) NhClose(&Queue->Cq->Header, Queue->Cq->Dispatch->NdkCloseCq);
    if (Queue->Adapter != NULL) {
        NhFree(&Queue->Capsules, &Queue->CapsulesMdl, &Queue->CapsulesLam);
        NhFree(&Queue->Data, &Queue->DataMdl, &Queue->DataLam);
    }
    Queue->Connector = NULL;
    Queue->Qp = NULL;
    Queue->Cq = NULL;
    Queue->Adapter = NULL;
}
