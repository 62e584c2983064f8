/*++

Module Name:

    transport.c

Abstract:

    smbdirect-client's MS-SMBD transport: the RDMA connection, the negotiate (§3.1.5.2, §3.2.5.2), send and
    receive credits (§3.1.5.1, §3.1.5.9), data transfer messages with fragmentation and reassembly
    (RemainingDataLength, §3.1.5.8), SMB_DIRECT_RESPONSE_REQUESTED and keepalive (§3.1.6.2), the fast-register
    MRs that carry READ and WRITE data (§3.1.4.3), and a clean disconnect.

    Credits: the server may send only as many messages as we have receives posted and have told it of. Each
    receive that comes back is posted again and counted in CreditsToGrant, which the next message we send hands
    over. We send only with a credit of the server's, and the message that takes our last credit asks for an
    answer. A message of the server's that asks for an answer gets one at once, empty if we have nothing to say,
    and so does a long fragmented message of the server's once half our receives wait to be granted.

Environment:

    Kernel mode (softndk kernel layer). Everything here runs at PASSIVE_LEVEL in the client worker.

--*/

#include "smbdirect_client.h"

/* What a completion belongs to: the kind in the high half of the request context, the index in the low half. */
#define SC_CTX_RECEIVE 0x10000
#define SC_CTX_SEND 0x20000
#define SC_CTX_NEGOTIATE 0x30000
#define SC_CTX_REGISTER 0x40000
#define SC_CTX_INVALIDATE 0x50000

static UCHAR g_NegotiateResponse[64];
static ULONG g_NegotiateResponseLength;

static VOID ScCqNotification(PVOID Context, NTSTATUS CqStatus) {
    UNREFERENCED_PARAMETER(Context);
    UNREFERENCED_PARAMETER(CqStatus);
    KeSetEvent(&g_Sc.CqEvent, IO_NO_INCREMENT, FALSE);
}

static VOID ScDisconnectEvent(PVOID Context) {
    UNREFERENCED_PARAMETER(Context);
    KeSetEvent(&g_Sc.Disconnected, IO_NO_INCREMENT, FALSE);
}

/* A local SGE over [Offset, Offset + Length) of a registered buffer (the privileged token covers it). */
static NDK_SGE ScSge(const SC_BUFFER* Buffer, ULONG Offset, ULONG Length) {
    NDK_SGE sge;
    ULONG at = Buffer->Fbo + Offset;
    RtlZeroMemory(&sge, sizeof(sge));
    sge.LogicalAddress.QuadPart = Buffer->Lam->AdapterPageArray[at / PAGE_SIZE].QuadPart + at % PAGE_SIZE;
    sge.Length = Length;
    sge.MemoryRegionToken = g_Sc.PrivilegedToken;
    return sge;
}

static NTSTATUS ScPostReceive(ULONG Slot) {
    NDK_SGE sge = ScSge(&g_Sc.Receives, Slot * SC_RECEIVE_SIZE, SC_RECEIVE_SIZE);
    return g_Sc.Qp->Dispatch->NdkReceive(g_Sc.Qp, (PVOID)(ULONG_PTR)(SC_CTX_RECEIVE | Slot), &sge, 1);
}

/* ---- connection ------------------------------------------------------------------------------------------- */

/* CQ, QP, buffers, the fast-register MRs, receives posted; then the connection (no private data: MS-SMBD has none
 * on iWARP). IRD 16: the server RDMA-Reads WRITE data from us; ORD 0: we read nothing. */
NTSTATUS ScConnect(void) {
    SC_WAIT wait;
    SOCKADDR_IN source, destination;
    ULONG i, chunk;
    NTSTATUS status;
    PAGED_CODE();
    ScInitWait(&wait);
    status =
        ScFinishCreate(g_Sc.Adapter->Dispatch->NdkCreateCq(g_Sc.Adapter, SC_RECEIVES + SC_SENDS + 2 * SC_MAX_MRS + 8,
                                                           ScCqNotification, NULL, NULL, ScCreateDone, &wait, &g_Sc.Cq),
                       &wait, (PVOID*)&g_Sc.Cq);
    if (!NT_SUCCESS(status)) return status;
    ScInitWait(&wait);
    status = ScFinishCreate(
        g_Sc.Pd->Dispatch->NdkCreateQp(g_Sc.Pd, g_Sc.Cq, g_Sc.Cq, NULL, SC_RECEIVES, SC_SENDS + 2 * SC_MAX_MRS + 2, 1,
                                       1, 0, ScCreateDone, &wait, &g_Sc.Qp),
        &wait, (PVOID*)&g_Sc.Qp);
    if (!NT_SUCCESS(status)) return status;
    g_Sc.Pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(g_Sc.Pd, &g_Sc.PrivilegedToken);
    status = ScAllocate((SIZE_T)SC_RECEIVES * SC_RECEIVE_SIZE, &g_Sc.Receives);
    if (NT_SUCCESS(status)) status = ScAllocate((SIZE_T)SC_SENDS * SC_RECEIVE_SIZE, &g_Sc.Sends);
    if (NT_SUCCESS(status)) status = ScAllocate(g_Sc.LargestIo, &g_Sc.Data);
    if (!NT_SUCCESS(status)) return status;
    g_Sc.Message = (PUCHAR)ExAllocatePool2(POOL_FLAG_NON_PAGED, SC_MAX_FRAGMENTED, SC_TAG);
    if (g_Sc.Message == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    /* one MR per FRMRPageCount - 1 pages: a chunk at any page offset then spans at most FRMRPageCount pages */
    chunk = (g_Sc.FrPages - 1) * PAGE_SIZE;
    g_Sc.MrCount = (g_Sc.LargestIo + chunk - 1) / chunk;
    for (i = 0; i < g_Sc.MrCount; ++i) {
        NDK_MR** mr = &g_Sc.Mrs[i].Mr;
        ScInitWait(&wait);
        status =
            ScFinishCreate(g_Sc.Pd->Dispatch->NdkCreateMr(g_Sc.Pd, TRUE, ScCreateDone, &wait, mr), &wait, (PVOID*)mr);
        if (!NT_SUCCESS(status)) return status;
        ScInitWait(&wait);
        status = ScFinish((*mr)->Dispatch->NdkInitializeFastRegisterMr(*mr, g_Sc.FrPages, TRUE, ScRequestDone, &wait),
                          &wait);
        if (!NT_SUCCESS(status)) return status;
    }
    for (i = 0; i < SC_RECEIVES; ++i) {
        status = ScPostReceive(i);
        if (!NT_SUCCESS(status)) return status;
    }
    ScInitWait(&wait);
    status =
        ScFinishCreate(g_Sc.Adapter->Dispatch->NdkCreateConnector(g_Sc.Adapter, ScCreateDone, &wait, &g_Sc.Connector),
                       &wait, (PVOID*)&g_Sc.Connector);
    if (!NT_SUCCESS(status)) return status;
    RtlZeroMemory(&source, sizeof(source));
    source.sin_family = AF_INET;
    source.sin_addr = g_Sc.LocalAddress;
    RtlZeroMemory(&destination, sizeof(destination));
    destination.sin_family = AF_INET;
    destination.sin_port = RtlUshortByteSwap(g_Sc.Port);
    destination.sin_addr = g_Sc.Address;
    ScInitWait(&wait);
    status = ScFinish(g_Sc.Connector->Dispatch->NdkConnect(g_Sc.Connector, g_Sc.Qp, (CONST PSOCKADDR)&source,
                                                           sizeof(source), (CONST PSOCKADDR)&destination,
                                                           sizeof(destination), 16, 0, NULL, 0, ScRequestDone, &wait),
                      &wait);
    if (!NT_SUCCESS(status)) {
        ScLog("smbdirect-client: connect to port %u: 0x%08X (%s)\n", g_Sc.Port, status, ScStatusText(status));
        return status;
    }
    ScInitWait(&wait);
    status = ScFinish(
        g_Sc.Connector->Dispatch->NdkCompleteConnect(g_Sc.Connector, ScDisconnectEvent, NULL, ScRequestDone, &wait),
        &wait);
    if (!NT_SUCCESS(status)) return status;
    g_Sc.Connected = TRUE;
    ScLog("smbdirect-client: connected: %u receives of %u bytes posted, %u fast-register MRs of %u pages\n",
          SC_RECEIVES, SC_RECEIVE_SIZE, g_Sc.MrCount, g_Sc.FrPages);
    return STATUS_SUCCESS;
}

/* ---- completions ------------------------------------------------------------------------------------------ */

/* A receive: the negotiate response while it is awaited, else a data transfer message (§2.2.3, §3.1.5.8). */
static NTSTATUS ScTakeReceive(ULONG Slot, ULONG Bytes) {
    const UCHAR* data = g_Sc.Receives.Base + (SIZE_T)Slot * SC_RECEIVE_SIZE;
    SMBD_DATA_HEADER header;
    NTSTATUS status;
    if (g_Sc.MaxSendSize == 0) {
        if (g_NegotiateResponseLength != 0) return ScProtocolError(__LINE__); /* a second message before credits */
        g_NegotiateResponseLength = Bytes < sizeof(g_NegotiateResponse) ? Bytes : sizeof(g_NegotiateResponse);
        RtlCopyMemory(g_NegotiateResponse, data, g_NegotiateResponseLength);
        return ScPostReceive(Slot);
    }
    if (Bytes < FIELD_OFFSET(SMBD_DATA_HEADER, Padding)) {
        ScLog("smbdirect-client: a message of %u bytes, shorter than the data transfer header\n", Bytes);
        return ScProtocolError(__LINE__);
    }
    RtlZeroMemory(&header, sizeof(header));
    RtlCopyMemory(&header, data, Bytes < sizeof(header) ? Bytes : sizeof(header));
    if (header.DataLength != 0 &&
        (header.DataOffset < FIELD_OFFSET(SMBD_DATA_HEADER, Padding) || header.DataOffset % 8 != 0 ||
         header.DataOffset > Bytes || header.DataLength > Bytes - header.DataOffset)) {
        ScLog("smbdirect-client: a message of %u bytes says data at %u, %u bytes\n", Bytes, header.DataOffset,
              header.DataLength);
        return ScProtocolError(__LINE__);
    }
    g_Sc.SendCredits += header.CreditsGranted;
    g_Sc.ServerWantsCredits = header.CreditsRequested;
    if (header.Flags & SMBD_RESPONSE_REQUESTED) g_Sc.AnswerRequested = TRUE;
    if (header.DataLength == 0) {
        ++g_Sc.CreditOnlyMessages;
    } else {
        if (g_Sc.MessageComplete) return ScProtocolError(__LINE__); /* taken only once the last one was read */
        if ((ULONG64)g_Sc.MessageLength + header.DataLength + header.RemainingDataLength > SC_MAX_FRAGMENTED) {
            ScLog("smbdirect-client: a message of %llu bytes, above our MaxFragmentedSize %u\n",
                  (unsigned long long)g_Sc.MessageLength + header.DataLength + header.RemainingDataLength,
                  SC_MAX_FRAGMENTED);
            return ScProtocolError(__LINE__);
        }
        RtlCopyMemory(g_Sc.Message + g_Sc.MessageLength, data + header.DataOffset, header.DataLength);
        g_Sc.MessageLength += header.DataLength;
        ++g_Sc.FragmentsIn;
        if (header.RemainingDataLength == 0) {
            g_Sc.MessageComplete = TRUE;
            ++g_Sc.MessagesIn;
        }
    }
    status = ScPostReceive(Slot);
    if (NT_SUCCESS(status)) ++g_Sc.CreditsToGrant;
    return status;
}

static SC_MR* ScMrOfToken(UINT32 Token) {
    ULONG i;
    for (i = 0; i < g_Sc.MrCount; ++i)
        if (g_Sc.Mrs[i].Registered && g_Sc.Mrs[i].Token == Token) return &g_Sc.Mrs[i];
    return NULL;
}

static NTSTATUS ScTake(const NDK_RESULT_EX* Result) {
    ULONG_PTR context = (ULONG_PTR)Result->RequestContext;
    ULONG kind = (ULONG)(context & ~(ULONG_PTR)0xFFFF), index = (ULONG)(context & 0xFFFF);
    if (!NT_SUCCESS(Result->Status)) {
        ScLog("smbdirect-client: a request (kind 0x%X, %u) completed with 0x%08X (%s)\n", kind >> 16, index,
              Result->Status, ScStatusText(Result->Status));
        return Result->Status;
    }
    switch (kind) {
        case SC_CTX_RECEIVE:
            if (index >= SC_RECEIVES) return ScProtocolError(__LINE__);
            if (Result->Type == NdkOperationTypeReceiveAndInvalidate) {
                /* the server invalidated a token (RDMA_V1_INVALIDATE): it must be one of ours, still valid */
                SC_MR* mr = ScMrOfToken((UINT32)Result->TypeSpecificCompletionOutput);
                if (mr == NULL) {
                    ScLog("smbdirect-client: the server invalidated token 0x%08X, which is none of ours\n",
                          (UINT32)Result->TypeSpecificCompletionOutput);
                    return ScProtocolError(__LINE__);
                }
                mr->Registered = FALSE;
                g_Sc.LastInvalidatedToken = mr->Token;
                ++g_Sc.RemoteInvalidations;
            }
            return ScTakeReceive(index, Result->BytesTransferred);
        case SC_CTX_SEND:
        case SC_CTX_NEGOTIATE:
            if (index >= SC_SENDS) return ScProtocolError(__LINE__);
            g_Sc.SendBusy[index] = FALSE;
            return STATUS_SUCCESS;
        case SC_CTX_REGISTER:
            return STATUS_SUCCESS; /* the Send behind it went after it */
        case SC_CTX_INVALIDATE:
            if (index >= g_Sc.MrCount) return ScProtocolError(__LINE__);
            g_Sc.Mrs[index].Registered = FALSE;
            ++g_Sc.LocalInvalidations;
            return STATUS_SUCCESS;
        default:
            return ScProtocolError(__LINE__);
    }
}

/* One completion, waiting up to Milliseconds for it; the server's disconnect or DriverUnload ends the wait. */
static NTSTATUS ScPoll(ULONG Milliseconds) {
    NDK_RESULT_EX result;
    PVOID objects[3];
    LARGE_INTEGER timeout;
    NTSTATUS status;
    PAGED_CODE();
    for (;;) {
        if (g_Sc.Cq->Dispatch->NdkGetCqResultsEx(g_Sc.Cq, &result, 1) == 1) return ScTake(&result);
        KeClearEvent(&g_Sc.CqEvent);
        g_Sc.Cq->Dispatch->NdkArmCq(g_Sc.Cq, NDK_CQ_NOTIFY_ANY);
        if (g_Sc.Cq->Dispatch->NdkGetCqResultsEx(g_Sc.Cq, &result, 1) == 1) return ScTake(&result);
        objects[0] = &g_Sc.CqEvent;
        objects[1] = &g_Sc.Disconnected;
        objects[2] = &g_Sc.Stop;
        timeout.QuadPart = -(LONGLONG)Milliseconds * 10000;
        status = KeWaitForMultipleObjects(3, objects, WaitAny, Executive, KernelMode, FALSE, &timeout, NULL);
        if (status == STATUS_WAIT_0) continue;
        if (status == STATUS_WAIT_1) {
            ScLog("smbdirect-client: the server disconnected (%u send credits, %u receives to grant)\n",
                  g_Sc.SendCredits, g_Sc.CreditsToGrant);
            return STATUS_CONNECTION_DISCONNECTED;
        }
        if (status == STATUS_TIMEOUT) {
            ScLog("smbdirect-client: nothing from the server for %u ms (%u send credits, %u receives to grant)\n",
                  Milliseconds, g_Sc.SendCredits, g_Sc.CreditsToGrant);
            return STATUS_IO_TIMEOUT;
        }
        return STATUS_REQUEST_ABORTED;
    }
}

/* ---- sending ---------------------------------------------------------------------------------------------- */

static LONG ScFreeSendSlot(void) {
    ULONG i;
    for (i = 0; i < SC_SENDS; ++i)
        if (!g_Sc.SendBusy[i]) return (LONG)i;
    return -1;
}

/* One data transfer message: Length bytes of Data (0: credits only), Remaining bytes of its upper-layer message
 * after it. Takes a credit of the server's; grants every receive posted since the last message. */
static NTSTATUS ScSendFragment(const UCHAR* Data, ULONG Length, ULONG Remaining, USHORT Flags) {
    LONG slot = ScFreeSendSlot();
    SMBD_DATA_HEADER* header;
    NDK_SGE sge;
    NTSTATUS status;
    if (slot < 0 || g_Sc.SendCredits == 0) return STATUS_DEVICE_BUSY;
    header = (SMBD_DATA_HEADER*)(g_Sc.Sends.Base + (SIZE_T)slot * SC_RECEIVE_SIZE);
    RtlZeroMemory(header, sizeof(*header));
    header->CreditsRequested = SC_CREDITS_WANTED;
    header->CreditsGranted = (USHORT)g_Sc.CreditsToGrant;
    /* §3.1.5.1: the message that takes the last credit asks for an answer, which brings more */
    header->Flags = (USHORT)(Flags | (g_Sc.SendCredits == 1 ? SMBD_RESPONSE_REQUESTED : 0));
    header->RemainingDataLength = Remaining;
    header->DataOffset = Length == 0 ? 0 : SMBD_DATA_OFFSET;
    header->DataLength = Length;
    if (Length != 0) RtlCopyMemory((PUCHAR)header + SMBD_DATA_OFFSET, Data, Length);
    sge = ScSge(&g_Sc.Sends, (ULONG)slot * SC_RECEIVE_SIZE,
                Length == 0 ? FIELD_OFFSET(SMBD_DATA_HEADER, Padding) : SMBD_DATA_OFFSET + Length);
    status = g_Sc.Qp->Dispatch->NdkSend(g_Sc.Qp, (PVOID)(ULONG_PTR)(SC_CTX_SEND | (ULONG)slot), &sge, 1, 0);
    if (!NT_SUCCESS(status)) return status;
    g_Sc.SendBusy[slot] = TRUE;
    --g_Sc.SendCredits;
    g_Sc.CreditsToGrant = 0;
    ++g_Sc.FragmentsOut;
    return STATUS_SUCCESS;
}

/* What the server asked for, or needs, while we wait: an answer, or credits in a long fragmented message. */
static NTSTATUS ScServiceCredits(void) {
    BOOLEAN starved = g_Sc.MessageLength != 0 && !g_Sc.MessageComplete && g_Sc.CreditsToGrant >= SC_RECEIVES / 2;
    NTSTATUS status;
    if (!g_Sc.AnswerRequested && !starved) return STATUS_SUCCESS;
    if (g_Sc.SendCredits == 0 || ScFreeSendSlot() < 0) return STATUS_SUCCESS; /* again after the next completion */
    status = ScSendFragment(NULL, 0, 0, 0);
    if (NT_SUCCESS(status)) {
        if (g_Sc.AnswerRequested)
            ++g_Sc.KeepalivesAnswered;
        else
            ++g_Sc.CreditGrantsSent;
        g_Sc.AnswerRequested = FALSE;
    }
    return status;
}

/* One completion, then whatever the server asked for. */
static NTSTATUS ScStep1(ULONG Milliseconds) {
    NTSTATUS status = ScPoll(Milliseconds);
    if (!NT_SUCCESS(status)) return status;
    return ScServiceCredits();
}

/* An upper-layer message, cut into fragments of the send size (§3.1.5.7). */
NTSTATUS ScSendMessage(const UCHAR* Message, ULONG Length) {
    ULONG chunk = g_Sc.MaxSendSize - SMBD_DATA_OFFSET, offset = 0;
    NTSTATUS status;
    PAGED_CODE();
    if (Length == 0 || Length > g_Sc.ServerMaxFragmented) return STATUS_INVALID_PARAMETER;
    while (offset < Length) {
        ULONG n = Length - offset < chunk ? Length - offset : chunk;
        while (g_Sc.SendCredits == 0 || ScFreeSendSlot() < 0) {
            status = ScStep1(SC_WAIT_MS);
            if (!NT_SUCCESS(status)) return status;
        }
        status = ScSendFragment(Message + offset, n, Length - offset - n, 0);
        if (!NT_SUCCESS(status)) return status;
        offset += n;
    }
    ++g_Sc.MessagesOut;
    return STATUS_SUCCESS;
}

/* The next whole upper-layer message from the server; valid until the next call. */
NTSTATUS ScReceiveMessage(PUCHAR* Message, PULONG Length) {
    NTSTATUS status;
    PAGED_CODE();
    if (g_Sc.MessageComplete) { /* the last one was read: start the next */
        g_Sc.MessageComplete = FALSE;
        g_Sc.MessageLength = 0;
    }
    while (!g_Sc.MessageComplete) {
        status = ScStep1(SC_WAIT_MS);
        if (!NT_SUCCESS(status)) return status;
    }
    *Message = g_Sc.Message;
    *Length = g_Sc.MessageLength;
    return STATUS_SUCCESS;
}

/* §3.1.6.2: an empty message that asks for an answer; the server's answer (any message) ends it. */
NTSTATUS ScKeepalive(void) {
    ULONG before = g_Sc.CreditOnlyMessages + g_Sc.FragmentsIn;
    NTSTATUS status;
    PAGED_CODE();
    while (g_Sc.SendCredits == 0 || ScFreeSendSlot() < 0) {
        status = ScStep1(SC_WAIT_MS);
        if (!NT_SUCCESS(status)) return status;
    }
    status = ScSendFragment(NULL, 0, 0, SMBD_RESPONSE_REQUESTED);
    while (NT_SUCCESS(status) && g_Sc.CreditOnlyMessages + g_Sc.FragmentsIn == before) status = ScStep1(SC_WAIT_MS);
    return status;
}

/* ---- negotiate -------------------------------------------------------------------------------------------- */

NTSTATUS ScNegotiateTransport(void) {
    SMBD_NEGOTIATE_REQUEST* request = (SMBD_NEGOTIATE_REQUEST*)g_Sc.Sends.Base;
    SMBD_NEGOTIATE_RESPONSE response;
    NDK_SGE sge = ScSge(&g_Sc.Sends, 0, sizeof(*request));
    NTSTATUS status;
    PAGED_CODE();
    RtlZeroMemory(request, sizeof(*request));
    request->MinVersion = SMBD_VERSION_1;
    request->MaxVersion = SMBD_VERSION_1;
    request->CreditsRequested = SC_CREDITS_WANTED;
    request->PreferredSendSize = SC_PREFERRED_SEND_SIZE;
    request->MaxReceiveSize = SC_RECEIVE_SIZE;
    request->MaxFragmentedSize = SC_MAX_FRAGMENTED;
    g_NegotiateResponseLength = 0;
    status = g_Sc.Qp->Dispatch->NdkSend(g_Sc.Qp, (PVOID)(ULONG_PTR)SC_CTX_NEGOTIATE, &sge, 1, 0);
    if (!NT_SUCCESS(status)) return status;
    g_Sc.SendBusy[0] = TRUE;
    while (g_NegotiateResponseLength == 0) {
        status = ScPoll(SC_WAIT_MS);
        if (!NT_SUCCESS(status)) return status;
    }
    if (g_NegotiateResponseLength < sizeof(response)) {
        ScLog("smbdirect-client: a negotiate response of %u bytes (32 expected)\n", g_NegotiateResponseLength);
        return ScProtocolError(__LINE__);
    }
    RtlCopyMemory(&response, g_NegotiateResponse, sizeof(response));
    ScLog(
        "smbdirect-client:   the server: version 0x%04X, status 0x%08X, %u credits granted of %u asked, %u wanted; "
        "largest read or write %u, it sends up to %u and receives up to %u bytes, fragmented messages up to %u\n",
        response.NegotiatedVersion, response.Status, response.CreditsGranted, SC_CREDITS_WANTED,
        response.CreditsRequested, response.MaxReadWriteSize, response.PreferredSendSize, response.MaxReceiveSize,
        response.MaxFragmentedSize);
    if (response.Status != 0) return (NTSTATUS)response.Status;
    /* §3.1.5.2: version 1.0; credits to send with; the server's sends fit our receives; ours fit its receives */
    if (response.NegotiatedVersion != SMBD_VERSION_1 || response.CreditsGranted == 0 ||
        response.PreferredSendSize > SC_RECEIVE_SIZE || response.MaxReceiveSize <= SMBD_DATA_OFFSET ||
        response.MaxReadWriteSize == 0 || response.MaxFragmentedSize == 0)
        return ScProtocolError(__LINE__);
    while (g_Sc.SendBusy[0]) { /* the request's Send completion, if it is not in yet */
        status = ScPoll(SC_WAIT_MS);
        if (!NT_SUCCESS(status)) return status;
    }
    g_Sc.SendCredits = response.CreditsGranted;
    g_Sc.MaxSendSize =
        response.MaxReceiveSize < SC_PREFERRED_SEND_SIZE ? response.MaxReceiveSize : SC_PREFERRED_SEND_SIZE;
    g_Sc.MaxReadWrite = response.MaxReadWriteSize < g_Sc.LargestIo ? response.MaxReadWriteSize : g_Sc.LargestIo;
    g_Sc.ServerMaxFragmented = response.MaxFragmentedSize;
    g_Sc.CreditsToGrant = SC_RECEIVES; /* every receive is posted again; the server holds none yet */
    return STATUS_SUCCESS;
}

/* ---- registration ----------------------------------------------------------------------------------------- */

/* Fast-registers [0, Length) of the data buffer on as many MRs as it takes, and describes them for the server
 * (§2.2.3.1). ServerWrites: a READ (the server RDMA-Writes into it); else a WRITE (it RDMA-Reads). */
NTSTATUS ScRegister(ULONG Length, BOOLEAN ServerWrites, SMBD_BUFFER_DESCRIPTOR* Descriptors, PULONG Count) {
    ULONG chunk = (g_Sc.FrPages - 1) * PAGE_SIZE, offset = 0, i = 0;
    ULONG access = ServerWrites ? NDK_OP_FLAG_ALLOW_REMOTE_WRITE : NDK_OP_FLAG_ALLOW_REMOTE_READ;
    ULONG64 start = KeQueryInterruptTime();
    NTSTATUS status;
    if (Length == 0 || Length > g_Sc.Data.Length) return STATUS_INVALID_PARAMETER;
    while (offset < Length) {
        ULONG n = Length - offset < chunk ? Length - offset : chunk;
        ULONG at = g_Sc.Data.Fbo + offset;
        ULONG pages = (at % PAGE_SIZE + n + PAGE_SIZE - 1) / PAGE_SIZE;
        SC_MR* mr = &g_Sc.Mrs[i];
        if (i >= g_Sc.MrCount || mr->Registered) return STATUS_INVALID_DEVICE_STATE; /* invalidate first */
        status = g_Sc.Qp->Dispatch->NdkFastRegister(g_Sc.Qp, (PVOID)(ULONG_PTR)(SC_CTX_REGISTER | i), mr->Mr, pages,
                                                    &g_Sc.Data.Lam->AdapterPageArray[at / PAGE_SIZE], at % PAGE_SIZE, n,
                                                    g_Sc.Data.Base + offset, access);
        if (!NT_SUCCESS(status)) return status;
        mr->Registered = TRUE;
        mr->Token = mr->Mr->Dispatch->NdkGetRemoteTokenFromMr(mr->Mr); /* valid once posted (FR-19) */
        Descriptors[i].Offset = (ULONG64)(ULONG_PTR)(g_Sc.Data.Base + offset);
        Descriptors[i].Token = mr->Token;
        Descriptors[i].Length = n;
        offset += n;
        ++i;
    }
    *Count = i;
    g_Sc.RegisterTime += KeQueryInterruptTime() - start;
    return STATUS_SUCCESS;
}

/* Every MR still registered (all of them, or those after the first when the server invalidated that one) is
 * invalidated here, and the I/O's buffer is ours again. */
NTSTATUS ScInvalidateRemaining(void) {
    ULONG64 start = KeQueryInterruptTime();
    ULONG i;
    NTSTATUS status;
    BOOLEAN any;
    PAGED_CODE();
    for (i = 0; i < g_Sc.MrCount; ++i) {
        if (!g_Sc.Mrs[i].Registered) continue;
        status = g_Sc.Qp->Dispatch->NdkInvalidate(g_Sc.Qp, (PVOID)(ULONG_PTR)(SC_CTX_INVALIDATE | i),
                                                  &g_Sc.Mrs[i].Mr->Header, 0);
        if (!NT_SUCCESS(status)) return status;
    }
    for (;;) {
        for (any = FALSE, i = 0; i < g_Sc.MrCount; ++i) any |= g_Sc.Mrs[i].Registered;
        if (!any) {
            g_Sc.RegisterTime += KeQueryInterruptTime() - start;
            return STATUS_SUCCESS;
        }
        status = ScStep1(SC_WAIT_MS);
        if (!NT_SUCCESS(status)) return status;
    }
}

/* ---- the end ---------------------------------------------------------------------------------------------- */

/* NdkDisconnect, then every request still posted comes back flushed; the CQ is drained until it stays empty. */
VOID ScDisconnect(void) {
    SC_WAIT wait;
    NDK_RESULT_EX result;
    ULONG flushed = 0;
    NTSTATUS status;
    PAGED_CODE();
    if (!g_Sc.Connected) return;
    ScInitWait(&wait);
    status = ScFinish(g_Sc.Connector->Dispatch->NdkDisconnect(g_Sc.Connector, ScRequestDone, &wait), &wait);
    g_Sc.Connected = FALSE;
    for (;;) {
        if (g_Sc.Cq->Dispatch->NdkGetCqResultsEx(g_Sc.Cq, &result, 1) == 0) {
            KeClearEvent(&g_Sc.CqEvent);
            g_Sc.Cq->Dispatch->NdkArmCq(g_Sc.Cq, NDK_CQ_NOTIFY_ANY);
            if (g_Sc.Cq->Dispatch->NdkGetCqResultsEx(g_Sc.Cq, &result, 1) == 0) {
                if (!NT_SUCCESS(ScWaitOrStop(&g_Sc.CqEvent, 1000))) break;
                continue;
            }
        }
        flushed += result.Status == STATUS_CANCELLED;
    }
    ScLog("smbdirect-client: disconnected: 0x%08X (%s); %u receives came back flushed\n", status, ScStatusText(status),
          flushed);
}

VOID ScTearDownConnection(void) {
    ULONG i;
    PAGED_CODE();
    if (g_Sc.Connector != NULL && g_Sc.Connected) ScDisconnect();
    if (g_Sc.Connector != NULL) ScClose(&g_Sc.Connector->Header, g_Sc.Connector->Dispatch->NdkCloseConnector);
    if (g_Sc.Qp != NULL) ScClose(&g_Sc.Qp->Header, g_Sc.Qp->Dispatch->NdkCloseQp);
    for (i = 0; i < SC_MAX_MRS; ++i) {
        if (g_Sc.Mrs[i].Mr != NULL) ScClose(&g_Sc.Mrs[i].Mr->Header, g_Sc.Mrs[i].Mr->Dispatch->NdkCloseMr);
        g_Sc.Mrs[i].Mr = NULL;
    }
    if (g_Sc.Cq != NULL) ScClose(&g_Sc.Cq->Header, g_Sc.Cq->Dispatch->NdkCloseCq);
    if (g_Sc.Adapter != NULL) {
        ScFree(&g_Sc.Receives);
        ScFree(&g_Sc.Sends);
        ScFree(&g_Sc.Data);
    }
    if (g_Sc.Message != NULL) ExFreePoolWithTag(g_Sc.Message, SC_TAG);
    g_Sc.Message = NULL;
    g_Sc.Connector = NULL;
    g_Sc.Qp = NULL;
    g_Sc.Cq = NULL;
}
