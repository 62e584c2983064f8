/*++

Module Name:

    smbdlite.c

Abstract:

    A second sample NDK consumer driver (issue 19 §4), written the way independent transports are, in the
    shape of SMB Direct (MS-SMBD) carrying SMB2-like READ and WRITE:

      - One driver holds both sides. The server opens the interface once for its listener and once more for
        every connection it accepts (WskOpenNdkAdapter on the same IfIndex), and accepts the listener's
        connector with a QP of that second open. The client opens its own interface (a second one when the
        LocalAddress parameter names another address: softndk-kmhost --interface 2=127.0.0.2).
      - Credits: each side posts SD_RECEIVE_DEPTH receives and grants them in the connect private data; a Send
        takes one credit, and every message grants back the receives reposted since the last one, so no Send
        ever meets a missing receive (iWARP would end the connection).
      - The client's data buffer is registered per request from a pool of fast-register MRs (NdkFastRegister
        over its LAM), for remote read (WRITE) or remote write (READ). The server RDMA Reads or Writes it and
        answers with NdkSendAndInvalidate of that token, which invalidates the MR remotely; the client checks
        the ReceiveAndInvalidate completion and returns the MR to the pool for its next registration.
      - The client's work is driven through its device: IOCTL_SD_WRITE and IOCTL_SD_READ IRPs to its own device
        object (IoAllocateIrp, IoCallDriver), served by the IRP_MJ_DEVICE_CONTROL dispatch routine.
      - Tear-down is DriverUnload's: it stops the workers, disconnects, closes every NDK object and adapter,
        frees the pools and deletes the device.

      client (SD_CHANNELS connections)                       server (an adapter open per connection)
      NdkConnect, private data {magic, credits} ------------> connect event: queued; a work item accepts
      IOCTL_SD_WRITE: per 64 KiB chunk, round robin:
        FRMR from the pool, NdkFastRegister(remote read)
        Send WRITE {offset, length, address, token} -------> NdkRead into the store
                                                    <------- NdkSendAndInvalidate RESPONSE (token)
      IOCTL_SD_READ: the same with remote write       -----> NdkWrite from the store
                                                    <------- NdkSendAndInvalidate RESPONSE (token)
      compare, Send DONE {checksum}                   -----> verify the store, Send DONE
      DriverUnload: NdkDisconnect, close                      disconnect event; DriverUnload closes

    Parameters (RegistryPath\Parameters, softndk-kmhost --parameter): Role ("both", "server", "client"),
    Address (the server's IPv4 address, 127.0.0.1), LocalAddress (the client's, default Address), Port.

Environment:

    Kernel mode (softndk kernel layer).

--*/

#include "smbdlite.h"

SD_DRIVER g_Sd;

DRIVER_INITIALIZE DriverEntry;
static DRIVER_UNLOAD SdUnload;
static DRIVER_DISPATCH SdDispatchCreateClose;
static DRIVER_DISPATCH SdDispatchDeviceControl;
static IO_WORKITEM_ROUTINE SdAcceptWorker;
static IO_WORKITEM_ROUTINE SdServeWorker;
static IO_WORKITEM_ROUTINE SdClientWorker;
static IO_COMPLETION_ROUTINE SdIrpDone;

/* ---- server --------------------------------------------------------------------------------------------- */

/* The listener's connect event, at DISPATCH_LEVEL: keep the connector for the accept worker. */
static VOID SdConnectEvent(PVOID Context, NDK_CONNECTOR* Connector) {
    KLOCK_QUEUE_HANDLE lock;
    BOOLEAN kept = FALSE;
    UNREFERENCED_PARAMETER(Context);
    KeAcquireInStackQueuedSpinLock(&g_Sd.IncomingLock, &lock);
    if (g_Sd.IncomingCount < SD_MAX_CONNECTIONS) {
        g_Sd.Incoming[g_Sd.IncomingCount++] = Connector;
        kept = TRUE;
    }
    KeReleaseInStackQueuedSpinLock(&lock);
    if (!kept) {
        Connector->Dispatch->NdkReject(Connector, NULL, 0);
        Connector->Dispatch->NdkCloseConnector(&Connector->Header, SdCloseIgnored, NULL);
        return;
    }
    KeSetEvent(&g_Sd.IncomingEvent, IO_NO_INCREMENT, FALSE);
}

/* Accepts Connector on a fresh open of the server's interface, with the connection's own PD, CQ and QP. */
static NTSTATUS SdAccept(PSD_CONNECTION Connection, NDK_CONNECTOR* Connector) {
    SD_NEGOTIATE hello, reply;
    SD_WAIT wait;
    ULONG inbound = 0, outbound = 0, length = sizeof(hello);
    NDK_ADAPTER* adapter = NULL;
    NTSTATUS status;
    PAGED_CODE();
    Connection->Connector = Connector;
    status = Connector->Dispatch->NdkGetConnectionData(Connector, &inbound, &outbound, &hello, &length);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(hello) || hello.Magic != SD_MAGIC || hello.Credits == 0) {
        Connector->Dispatch->NdkReject(Connector, NULL, 0);
        return SdProtocolError(__LINE__);
    }
    status = SdOpenAdapter(g_Sd.ServerIfIndex, &adapter); /* the same interface, opened again */
    if (!NT_SUCCESS(status)) return status;
    status = SdSetUpConnection(Connection, adapter, NULL);
    if (!NT_SUCCESS(status)) return status;
    SdInitWait(&wait);
    status = SdFinishCreate(
        Connection->Pd->Dispatch->NdkCreateMr(Connection->Pd, FALSE, SdCreateDone, &wait, &Connection->StoreMr), &wait,
        (PVOID*)&Connection->StoreMr);
    if (!NT_SUCCESS(status)) return status;
    SdInitWait(&wait);
    status = SdFinish(Connection->StoreMr->Dispatch->NdkRegisterMr(
                          Connection->StoreMr, g_Sd.StoreMdl, SD_FILE_SIZE,
                          NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK, SdRequestDone, &wait),
                      &wait);
    if (!NT_SUCCESS(status)) return status;
    Connection->SendCredits = hello.Credits;
    reply.Magic = SD_MAGIC;
    reply.Credits = SD_RECEIVE_DEPTH;
    reply.Channel = hello.Channel;
    SdInitWait(&wait);
    status =
        SdFinish(Connector->Dispatch->NdkAccept(Connector, Connection->Qp, inbound, outbound, &reply, sizeof(reply),
                                                SdDisconnectEvent, Connection, SdRequestDone, &wait),
                 &wait);
    if (!NT_SUCCESS(status)) return status;
    Connection->Connected = TRUE;
    return STATUS_SUCCESS;
}

/* Serves one connection: WRITE (RDMA Read from the client), READ (RDMA Write to it), each answered with
 * NdkSendAndInvalidate of the client's token; DONE is checked against the store. */
static NTSTATUS SdServe(PSD_CONNECTION Connection) {
    SD_MESSAGE request, answer;
    ULONG served = 0;
    PAGED_CODE();
    for (;;) {
        NDK_SGE sge;
        NTSTATUS status = SdReceive(Connection, &request, NULL);
        if (!NT_SUCCESS(status)) return status;
        RtlZeroMemory(&answer, sizeof(answer));
        answer.Command = SdResponse;
        answer.RequestId = request.RequestId;
        if (request.Command == SdDone) {
            ULONG checksum = SdChecksum(g_Sd.Store, SD_FILE_SIZE);
            answer.Command = SdDone;
            answer.Status = checksum == request.Checksum ? STATUS_SUCCESS : STATUS_DATA_ERROR;
            status = SdSend(Connection, &answer, 0);
            if (!NT_SUCCESS(status)) return status;
            SdLog("smbdlite: server channel %u verified the store (%u requests, checksum 0x%08x)\n", Connection->Index,
                  served, checksum);
            return answer.Status;
        }
        if ((request.Command != SdWrite && request.Command != SdRead) || request.Length == 0 ||
            request.FileOffset > SD_FILE_SIZE || request.Length > SD_FILE_SIZE - request.FileOffset ||
            request.Token == 0) {
            SdLog("smbdlite: server channel %u: request %u, command %u, offset %llu, length %u, token 0x%x\n",
                  Connection->Index, request.RequestId, request.Command, (unsigned long long)request.FileOffset,
                  request.Length, request.Token);
            return SdProtocolError(__LINE__);
        }
        sge.VirtualAddress = g_Sd.Store + request.FileOffset;
        sge.Length = request.Length;
        sge.MemoryRegionToken = Connection->StoreMr->Dispatch->NdkGetLocalTokenFromMr(Connection->StoreMr);
        status =
            request.Command == SdWrite
                ? Connection->Qp->Dispatch->NdkRead(Connection->Qp, &sge, &sge, 1, request.Address, request.Token, 0)
                : Connection->Qp->Dispatch->NdkWrite(Connection->Qp, &sge, &sge, 1, request.Address, request.Token, 0);
        if (NT_SUCCESS(status)) status = SdWaitInitiator(Connection, &sge);
        answer.Status = status;
        answer.Length = NT_SUCCESS(status) ? request.Length : 0;
        status = SdSend(Connection, &answer, request.Token); /* the client's FRMR is invalidated remotely */
        if (!NT_SUCCESS(status)) return status;
        ++served;
    }
}

static VOID SdServeWorker(PDEVICE_OBJECT Device, PVOID Context) {
    PSD_CONNECTION connection = (PSD_CONNECTION)Context;
    NTSTATUS status;
    UNREFERENCED_PARAMETER(Device);
    status = SdServe(connection);
    if (NT_SUCCESS(status)) status = SdWaitOrStop(&connection->Disconnected); /* the client disconnects first */
    if (NT_SUCCESS(status)) {
        /* Answer the client's disconnect (its NdkDisconnect completes on ours); the objects stay for
         * DriverUnload. */
        SD_WAIT wait;
        SdInitWait(&wait);
        status = SdFinish(connection->Connector->Dispatch->NdkDisconnect(connection->Connector, SdRequestDone, &wait),
                          &wait);
        connection->Connected = FALSE;
    }
    if (!NT_SUCCESS(status) && status != STATUS_REQUEST_ABORTED)
        SdLog("smbdlite: server channel %u ended: 0x%08X\n", connection->Index, status);
    KeSetEvent(&connection->WorkerDone, IO_NO_INCREMENT, FALSE);
    if (InterlockedIncrement(&g_Sd.ServedDone) == SD_CHANNELS) KeSetEvent(&g_Sd.ServerDone, IO_NO_INCREMENT, FALSE);
    ExReleaseRundownProtection(&g_Sd.Rundown);
}

/* Listens, then accepts SD_CHANNELS connections, each served by its own work item. */
static NTSTATUS SdListenAndAccept(void) {
    SD_WAIT wait;
    SOCKADDR_IN address;
    NTSTATUS status;
    PAGED_CODE();
    status = SdOpenAdapter(g_Sd.ServerIfIndex, &g_Sd.ListenAdapter);
    if (!NT_SUCCESS(status)) return status;
    SdInitWait(&wait);
    status = SdFinishCreate(g_Sd.ListenAdapter->Dispatch->NdkCreateListener(g_Sd.ListenAdapter, SdConnectEvent, NULL,
                                                                            SdCreateDone, &wait, &g_Sd.Listener),
                            &wait, (PVOID*)&g_Sd.Listener);
    if (!NT_SUCCESS(status)) return status;
    RtlZeroMemory(&address, sizeof(address));
    address.sin_family = AF_INET;
    address.sin_port = RtlUshortByteSwap(g_Sd.Port);
    address.sin_addr = g_Sd.Address;
    SdInitWait(&wait);
    status = SdFinish(g_Sd.Listener->Dispatch->NdkListen(g_Sd.Listener, (CONST PSOCKADDR)&address, sizeof(address),
                                                         SdRequestDone, &wait),
                      &wait);
    if (!NT_SUCCESS(status)) return status;
    SdLog("smbdlite: server listening on port %u, interface %u\n", g_Sd.Port, g_Sd.ServerIfIndex);
    KeSetEvent(&g_Sd.Listening, IO_NO_INCREMENT, FALSE);
    while (g_Sd.ServedCount < SD_CHANNELS) {
        KLOCK_QUEUE_HANDLE lock;
        NDK_CONNECTOR* connector = NULL;
        PSD_CONNECTION connection = &g_Sd.Served[g_Sd.ServedCount];
        KeAcquireInStackQueuedSpinLock(&g_Sd.IncomingLock, &lock);
        if (g_Sd.ServedCount < g_Sd.IncomingCount) connector = g_Sd.Incoming[g_Sd.ServedCount];
        KeReleaseInStackQueuedSpinLock(&lock);
        if (connector == NULL) {
            status = SdWaitOrStop(&g_Sd.IncomingEvent);
            if (!NT_SUCCESS(status)) return status;
            continue;
        }
        connection->Index = g_Sd.ServedCount++;
        status = SdAccept(connection, connector);
        if (!NT_SUCCESS(status)) return status;
        if (!ExAcquireRundownProtection(&g_Sd.Rundown)) return STATUS_REQUEST_ABORTED;
        IoQueueWorkItem(connection->Worker, SdServeWorker, DelayedWorkQueue, connection);
    }
    return STATUS_SUCCESS;
}

static VOID SdAcceptWorker(PDEVICE_OBJECT Device, PVOID Context) {
    NTSTATUS status;
    UNREFERENCED_PARAMETER(Device);
    UNREFERENCED_PARAMETER(Context);
    status = SdListenAndAccept(); /* the connections' own work items serve them */
    if (!NT_SUCCESS(status)) {
        SdLog("smbdlite: server aborted: 0x%08X\n", status);
        KeSetEvent(&g_Sd.ServerDone, IO_NO_INCREMENT, FALSE);
    }
    ExReleaseRundownProtection(&g_Sd.Rundown);
}

/* ---- client --------------------------------------------------------------------------------------------- */

static NTSTATUS SdConnectChannel(PSD_CONNECTION Channel) {
    SD_WAIT wait;
    SD_NEGOTIATE hello, reply;
    SOCKADDR_IN source, destination;
    ULONG inbound = 0, outbound = 0, length = sizeof(reply);
    NTSTATUS status;
    PAGED_CODE();
    status = SdSetUpConnection(Channel, g_Sd.ClientAdapter, g_Sd.ClientPd);
    if (!NT_SUCCESS(status)) return status;
    SdInitWait(&wait);
    status = SdFinishCreate(
        g_Sd.ClientAdapter->Dispatch->NdkCreateConnector(g_Sd.ClientAdapter, SdCreateDone, &wait, &Channel->Connector),
        &wait, (PVOID*)&Channel->Connector);
    if (!NT_SUCCESS(status)) return status;
    hello.Magic = SD_MAGIC;
    hello.Credits = SD_RECEIVE_DEPTH;
    hello.Channel = (USHORT)Channel->Index;
    RtlZeroMemory(&source, sizeof(source));
    source.sin_family = AF_INET;
    source.sin_addr = g_Sd.LocalAddress;
    RtlZeroMemory(&destination, sizeof(destination));
    destination.sin_family = AF_INET;
    destination.sin_port = RtlUshortByteSwap(g_Sd.Port);
    destination.sin_addr = g_Sd.Address;
    SdInitWait(&wait);
    /* IRD 4: the server RDMA Reads our buffers; ORD 0: we read nothing. */
    status = SdFinish(
        Channel->Connector->Dispatch->NdkConnect(Channel->Connector, Channel->Qp, (CONST PSOCKADDR)&source,
                                                 sizeof(source), (CONST PSOCKADDR)&destination, sizeof(destination), 4,
                                                 0, &hello, sizeof(hello), SdRequestDone, &wait),
        &wait);
    if (!NT_SUCCESS(status)) return status;
    status =
        Channel->Connector->Dispatch->NdkGetConnectionData(Channel->Connector, &inbound, &outbound, &reply, &length);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(reply) || reply.Magic != SD_MAGIC || reply.Credits == 0) return SdProtocolError(__LINE__);
    Channel->SendCredits = reply.Credits;
    SdInitWait(&wait);
    status = SdFinish(Channel->Connector->Dispatch->NdkCompleteConnect(Channel->Connector, SdDisconnectEvent, Channel,
                                                                       SdRequestDone, &wait),
                      &wait);
    if (!NT_SUCCESS(status)) return status;
    Channel->Connected = TRUE;
    return STATUS_SUCCESS;
}

/* A free FRMR of the pool, fast-registered over the data buffer's pages of [Offset, Offset + Length). */
static NTSTATUS SdRegisterChunk(PSD_CONNECTION Channel, ULONG Offset, ULONG Length, ULONG Access, SD_FRMR** Frmr) {
    /* the chunk's place in the LAM: its pages from the one holding byte DataFbo + Offset */
    ULONG i, first = (g_Sd.DataFbo + Offset) / PAGE_SIZE, fbo = (g_Sd.DataFbo + Offset) % PAGE_SIZE;
    ULONG pages = (fbo + Length + PAGE_SIZE - 1) / PAGE_SIZE;
    NTSTATUS status;
    for (i = 0; i < SD_FRMR_POOL && g_Sd.Pool[i].Busy; ++i) {
    }
    if (i == SD_FRMR_POOL) return STATUS_INSUFFICIENT_RESOURCES;
    status = Channel->Qp->Dispatch->NdkFastRegister(Channel->Qp, g_Sd.Pool[i].Mr, g_Sd.Pool[i].Mr, pages,
                                                    &g_Sd.DataLam->AdapterPageArray[first], fbo, Length,
                                                    g_Sd.Data + Offset, Access);
    if (NT_SUCCESS(status)) status = SdWaitInitiator(Channel, g_Sd.Pool[i].Mr);
    if (!NT_SUCCESS(status)) return status;
    g_Sd.Pool[i].Busy = TRUE;
    g_Sd.Pool[i].Token = g_Sd.Pool[i].Mr->Dispatch->NdkGetRemoteTokenFromMr(g_Sd.Pool[i].Mr);
    *Frmr = &g_Sd.Pool[i];
    return STATUS_SUCCESS;
}

/* A RESPONSE came in a ReceiveAndInvalidate of the FRMR's token: the MR is invalid again and back in the pool. */
static NTSTATUS SdCompleteResponse(const SD_MESSAGE* Response, const NDK_RESULT_EX* Received) {
    ULONG i;
    for (i = 0; i < SD_FRMR_POOL; ++i) {
        SD_FRMR* frmr = &g_Sd.Pool[i];
        if (!frmr->Busy || frmr->RequestId != Response->RequestId) continue;
        if (Received->Type != NdkOperationTypeReceiveAndInvalidate ||
            (UINT32)Received->TypeSpecificCompletionOutput != frmr->Token)
            return SdProtocolError(__LINE__);
        frmr->Busy = FALSE;
        if (!NT_SUCCESS(Response->Status)) return Response->Status;
        g_Sd.Transferred += Response->Length;
        return STATUS_SUCCESS;
    }
    return SdProtocolError(__LINE__);
}

/* WRITE or READ of the whole file: 64 KiB chunks round robin over the channels; per channel as many requests in
 * flight as credits and free FRMRs allow. */
static NTSTATUS SdTransfer(SD_COMMAND Command) {
    ULONG next[SD_CHANNELS], inflight[SD_CHANNELS], c, remaining = 0;
    const ULONG chunks = (SD_FILE_SIZE + SD_CHUNK_SIZE - 1) / SD_CHUNK_SIZE;
    NTSTATUS status;
    PAGED_CODE();
    for (c = 0; c < SD_CHANNELS; ++c) {
        next[c] = c;
        inflight[c] = 0;
    }
    remaining = chunks;
    while (remaining > 0) {
        for (c = 0; c < SD_CHANNELS; ++c) {
            PSD_CONNECTION channel = &g_Sd.Channels[c];
            /* keep one credit for DONE and the last grants */
            while (next[c] < chunks && channel->SendCredits > 1) {
                SD_MESSAGE request;
                SD_FRMR* frmr = NULL;
                ULONG offset = next[c] * SD_CHUNK_SIZE, length = min(SD_CHUNK_SIZE, SD_FILE_SIZE - offset);
                status = SdRegisterChunk(
                    channel, offset, length,
                    Command == SdWrite ? NDK_OP_FLAG_ALLOW_REMOTE_READ : NDK_OP_FLAG_ALLOW_REMOTE_WRITE, &frmr);
                if (status == STATUS_INSUFFICIENT_RESOURCES) break; /* the pool is in use: take responses first */
                if (!NT_SUCCESS(status)) return status;
                RtlZeroMemory(&request, sizeof(request));
                request.Command = (USHORT)Command;
                request.RequestId = frmr->RequestId = ++g_Sd.NextRequestId;
                request.FileOffset = offset;
                request.Address = (ULONG64)(ULONG_PTR)(g_Sd.Data + offset);
                request.Length = length;
                request.Token = frmr->Token;
                status = SdSend(channel, &request, 0);
                if (!NT_SUCCESS(status)) return status;
                ++inflight[c];
                next[c] += SD_CHANNELS;
            }
            while (inflight[c] > 0) {
                SD_MESSAGE response;
                NDK_RESULT_EX received;
                status = SdReceive(channel, &response, &received);
                if (NT_SUCCESS(status)) status = SdCompleteResponse(&response, &received);
                if (!NT_SUCCESS(status)) return status;
                --inflight[c];
                --remaining;
            }
        }
    }
    return STATUS_SUCCESS;
}

/* The IOCTL path: the client's IRPs to its own device. */
static NTSTATUS SdDispatchDeviceControl(PDEVICE_OBJECT DeviceObject, PIRP Irp) {
    PIO_STACK_LOCATION stack = IoGetCurrentIrpStackLocation(Irp);
    NTSTATUS status;
    UNREFERENCED_PARAMETER(DeviceObject);
    PAGED_CODE();
    switch (stack->Parameters.DeviceIoControl.IoControlCode) {
        case IOCTL_SD_WRITE:
            status = SdTransfer(SdWrite);
            break;
        case IOCTL_SD_READ:
            RtlZeroMemory(g_Sd.Data, SD_FILE_SIZE);
            status = SdTransfer(SdRead);
            break;
        default:
            status = STATUS_INVALID_DEVICE_REQUEST;
            break;
    }
    Irp->IoStatus.Status = status;
    Irp->IoStatus.Information = NT_SUCCESS(status) ? SD_FILE_SIZE : 0;
    IoCompleteRequest(Irp, IO_NO_INCREMENT);
    return status;
}

static NTSTATUS SdDispatchCreateClose(PDEVICE_OBJECT DeviceObject, PIRP Irp) {
    UNREFERENCED_PARAMETER(DeviceObject);
    Irp->IoStatus.Status = STATUS_SUCCESS;
    Irp->IoStatus.Information = 0;
    IoCompleteRequest(Irp, IO_NO_INCREMENT);
    return STATUS_SUCCESS;
}

static NTSTATUS SdIrpDone(PDEVICE_OBJECT DeviceObject, PIRP Irp, PVOID Context) {
    UNREFERENCED_PARAMETER(DeviceObject);
    UNREFERENCED_PARAMETER(Irp);
    KeSetEvent((PKEVENT)Context, IO_NO_INCREMENT, FALSE);
    return STATUS_MORE_PROCESSING_REQUIRED; /* the IRP is ours to free */
}

static NTSTATUS SdIoctl(ULONG Code) {
    KEVENT done;
    PIRP irp = IoAllocateIrp(g_Sd.Device->StackSize, FALSE);
    PIO_STACK_LOCATION stack;
    NTSTATUS status;
    PAGED_CODE();
    if (irp == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    KeInitializeEvent(&done, NotificationEvent, FALSE);
    stack = IoGetNextIrpStackLocation(irp);
    stack->MajorFunction = IRP_MJ_DEVICE_CONTROL;
    stack->Parameters.DeviceIoControl.IoControlCode = Code;
    IoSetCompletionRoutine(irp, SdIrpDone, &done, TRUE, TRUE, TRUE);
    status = IoCallDriver(g_Sd.Device, irp);
    if (status == STATUS_PENDING) KeWaitForSingleObject(&done, Executive, KernelMode, FALSE, NULL);
    status = irp->IoStatus.Status;
    IoFreeIrp(irp);
    return status;
}

static NTSTATUS SdRunClient(void) {
    SD_WAIT wait;
    SD_MESSAGE done;
    ULONG i, c;
    NTSTATUS status;
    PAGED_CODE();
    status = SdWaitOrStop(&g_Sd.Listening);
    if (!NT_SUCCESS(status)) return status;
    status = SdOpenAdapter(g_Sd.ClientIfIndex, &g_Sd.ClientAdapter);
    if (!NT_SUCCESS(status)) return status;
    SdInitWait(&wait);
    status = SdFinishCreate(
        g_Sd.ClientAdapter->Dispatch->NdkCreatePd(g_Sd.ClientAdapter, SdCreateDone, &wait, &g_Sd.ClientPd), &wait,
        (PVOID*)&g_Sd.ClientPd);
    if (!NT_SUCCESS(status)) return status;
    status = SdAllocate(g_Sd.ClientAdapter, SD_FILE_SIZE, &g_Sd.Data, &g_Sd.DataMdl, &g_Sd.DataLam, &g_Sd.DataFbo);
    if (!NT_SUCCESS(status)) return status;
    for (i = 0; i < SD_FILE_SIZE; ++i) g_Sd.Data[i] = SdPattern(i);
    for (c = 0; c < SD_CHANNELS; ++c) {
        g_Sd.Channels[c].Index = c;
        status = SdConnectChannel(&g_Sd.Channels[c]);
        if (!NT_SUCCESS(status)) return status;
    }
    /* The FRMR pool, on the PD every channel shares. */
    for (i = 0; i < SD_FRMR_POOL; ++i) {
        SdInitWait(&wait);
        status = SdFinishCreate(
            g_Sd.ClientPd->Dispatch->NdkCreateMr(g_Sd.ClientPd, TRUE, SdCreateDone, &wait, &g_Sd.Pool[i].Mr), &wait,
            (PVOID*)&g_Sd.Pool[i].Mr);
        if (!NT_SUCCESS(status)) return status;
        SdInitWait(&wait);
        status = SdFinish(g_Sd.Pool[i].Mr->Dispatch->NdkInitializeFastRegisterMr(g_Sd.Pool[i].Mr, SD_CHUNK_PAGES, TRUE,
                                                                                 SdRequestDone, &wait),
                          &wait);
        if (!NT_SUCCESS(status)) return status;
    }
    status = SdIoctl(IOCTL_SD_WRITE);
    if (!NT_SUCCESS(status)) return status;
    status = SdIoctl(IOCTL_SD_READ);
    if (!NT_SUCCESS(status)) return status;
    for (i = 0; i < SD_FILE_SIZE; ++i)
        if (g_Sd.Data[i] != SdPattern(i)) KeBugCheckEx(0x5DB0BAD, i, g_Sd.Data[i], SdPattern(i), 0);
    for (c = 0; c < SD_CHANNELS; ++c) {
        SD_MESSAGE answer;
        RtlZeroMemory(&done, sizeof(done));
        done.Command = SdDone;
        done.Checksum = SdChecksum(g_Sd.Data, SD_FILE_SIZE);
        status = SdSend(&g_Sd.Channels[c], &done, 0);
        if (NT_SUCCESS(status)) status = SdReceive(&g_Sd.Channels[c], &answer, NULL);
        if (!NT_SUCCESS(status)) return status;
        if (answer.Command != SdDone || !NT_SUCCESS(answer.Status)) return STATUS_DATA_ERROR;
    }
    SdLog("smbdlite: client wrote and read back %u bytes over %u channels, %u bytes moved\n", SD_FILE_SIZE, SD_CHANNELS,
          g_Sd.Transferred);
    /* Disconnect from our side first; the objects stay for DriverUnload. */
    for (c = 0; c < SD_CHANNELS; ++c) {
        SdInitWait(&wait);
        status = SdFinish(
            g_Sd.Channels[c].Connector->Dispatch->NdkDisconnect(g_Sd.Channels[c].Connector, SdRequestDone, &wait),
            &wait);
        g_Sd.Channels[c].Connected = FALSE;
        if (!NT_SUCCESS(status)) return status;
    }
    return STATUS_SUCCESS;
}

static VOID SdClientWorker(PDEVICE_OBJECT Device, PVOID Context) {
    NTSTATUS status;
    UNREFERENCED_PARAMETER(Device);
    UNREFERENCED_PARAMETER(Context);
    status = SdRunClient();
    if (!NT_SUCCESS(status)) SdLog("smbdlite: client aborted: 0x%08X\n", status);
    KeSetEvent(&g_Sd.ClientDone, IO_NO_INCREMENT, FALSE);
    ExReleaseRundownProtection(&g_Sd.Rundown);
}

/* ---- DriverEntry / DriverUnload --------------------------------------------------------------------------- */

static NTSTATUS SdQueryParameter(HANDLE Key, PCWSTR Name, ULONG Type, PVOID Buffer, ULONG Size) {
    UCHAR storage[sizeof(KEY_VALUE_PARTIAL_INFORMATION) + 64 * sizeof(WCHAR)];
    PKEY_VALUE_PARTIAL_INFORMATION value = (PKEY_VALUE_PARTIAL_INFORMATION)storage;
    UNICODE_STRING name;
    ULONG length = 0;
    NTSTATUS status;
    RtlInitUnicodeString(&name, Name);
    status = ZwQueryValueKey(Key, &name, KeyValuePartialInformation, value, sizeof(storage), &length);
    if (status == STATUS_OBJECT_NAME_NOT_FOUND) return STATUS_SUCCESS;
    if (!NT_SUCCESS(status)) return status;
    if (value->Type != Type || value->DataLength > Size) return STATUS_INVALID_PARAMETER;
    RtlCopyMemory(Buffer, value->Data, value->DataLength);
    return STATUS_SUCCESS;
}

static NTSTATUS SdReadParameters(PUNICODE_STRING RegistryPath) {
    static const WCHAR parameters[] = L"\\Parameters";
    UNICODE_STRING path;
    OBJECT_ATTRIBUTES attributes;
    HANDLE key = NULL;
    WCHAR role[16] = {0}, address[32] = {0}, local[32] = {0};
    ULONG port = SD_PORT;
    PCWSTR end = NULL;
    NTSTATUS status;
    PAGED_CODE();
    g_Sd.Role = SdRoleBoth;
    g_Sd.Address.S_un.S_addr = RtlUlongByteSwap(0x7F000001);
    g_Sd.Port = SD_PORT;
    path.Length = 0;
    path.MaximumLength = (USHORT)(RegistryPath->Length + sizeof(parameters));
    path.Buffer = (PWCH)ExAllocatePool2(POOL_FLAG_PAGED, path.MaximumLength, SD_TAG);
    if (path.Buffer == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    RtlCopyUnicodeString(&path, RegistryPath);
    status = RtlAppendUnicodeToString(&path, parameters);
    if (NT_SUCCESS(status)) {
        InitializeObjectAttributes(&attributes, &path, OBJ_CASE_INSENSITIVE | OBJ_KERNEL_HANDLE, NULL, NULL);
        status = ZwOpenKey(&key, KEY_READ, &attributes);
    }
    ExFreePoolWithTag(path.Buffer, SD_TAG);
    if (status == STATUS_OBJECT_NAME_NOT_FOUND) status = STATUS_SUCCESS;
    if (!NT_SUCCESS(status)) return status;
    if (key != NULL) {
        status = SdQueryParameter(key, L"Role", REG_SZ, role, sizeof(role) - sizeof(WCHAR));
        if (NT_SUCCESS(status))
            status = SdQueryParameter(key, L"Address", REG_SZ, address, sizeof(address) - sizeof(WCHAR));
        if (NT_SUCCESS(status))
            status = SdQueryParameter(key, L"LocalAddress", REG_SZ, local, sizeof(local) - sizeof(WCHAR));
        if (NT_SUCCESS(status)) status = SdQueryParameter(key, L"Port", REG_DWORD, &port, sizeof(port));
        ZwClose(key);
        if (!NT_SUCCESS(status)) return status;
    }
    if (role[0] != 0) {
        UNICODE_STRING text, server, client, both;
        RtlInitUnicodeString(&text, role);
        RtlInitUnicodeString(&server, L"server");
        RtlInitUnicodeString(&client, L"client");
        RtlInitUnicodeString(&both, L"both");
        if (RtlEqualUnicodeString(&text, &server, TRUE))
            g_Sd.Role = SdRoleServer;
        else if (RtlEqualUnicodeString(&text, &client, TRUE))
            g_Sd.Role = SdRoleClient;
        else if (!RtlEqualUnicodeString(&text, &both, TRUE))
            return STATUS_INVALID_PARAMETER;
    }
    if (address[0] != 0) {
        status = RtlIpv4StringToAddressW(address, TRUE, &end, &g_Sd.Address);
        if (!NT_SUCCESS(status) || *end != 0) return STATUS_INVALID_PARAMETER;
    }
    g_Sd.LocalAddress = g_Sd.Address;
    if (local[0] != 0) {
        status = RtlIpv4StringToAddressW(local, TRUE, &end, &g_Sd.LocalAddress);
        if (!NT_SUCCESS(status) || *end != 0) return STATUS_INVALID_PARAMETER;
    }
    if (port == 0 || port > 0xFFFF) return STATUS_INVALID_PARAMETER;
    g_Sd.Port = (USHORT)port;
    return STATUS_SUCCESS;
}

/* The interface that holds Address (ConvertInterfaceLuidToIndex style lookups go through the address table). */
static NTSTATUS SdInterfaceOf(IN_ADDR Address, NET_IFINDEX* IfIndex) {
    PMIB_UNICASTIPADDRESS_TABLE table = NULL;
    NTSTATUS status = GetUnicastIpAddressTable(AF_INET, &table);
    ULONG i;
    if (!NT_SUCCESS(status)) return status;
    status = STATUS_NOT_FOUND;
    for (i = 0; i < table->NumEntries; ++i) {
        if (table->Table[i].Address.Ipv4.sin_addr.S_un.S_addr == Address.S_un.S_addr) {
            *IfIndex = table->Table[i].InterfaceIndex;
            status = STATUS_SUCCESS;
            break;
        }
    }
    FreeMibTable(table);
    return status;
}

/* Everything DriverEntry made, in reverse; also DriverEntry's failure path. */
static VOID SdTearDown(void) {
    ULONG i;
    PAGED_CODE();
    for (i = 0; i < SD_CHANNELS; ++i) SdTearDownConnection(&g_Sd.Channels[i], FALSE);
    for (i = 0; i < SD_FRMR_POOL; ++i)
        if (g_Sd.Pool[i].Mr != NULL) SdClose(&g_Sd.Pool[i].Mr->Header, g_Sd.Pool[i].Mr->Dispatch->NdkCloseMr);
    if (g_Sd.ClientPd != NULL) SdClose(&g_Sd.ClientPd->Header, g_Sd.ClientPd->Dispatch->NdkClosePd);
    if (g_Sd.ClientAdapter != NULL) {
        SdFree(g_Sd.ClientAdapter, &g_Sd.Data, &g_Sd.DataMdl, &g_Sd.DataLam);
        g_Sd.Ndk.WskCloseNdkAdapter(g_Sd.WskProvider.Client, g_Sd.ClientAdapter);
        g_Sd.ClientAdapter = NULL;
    }
    for (i = 0; i < g_Sd.ServedCount; ++i) SdTearDownConnection(&g_Sd.Served[i], TRUE);
    /* connectors the connect event kept that were never accepted; none is kept from now on */
    {
        NDK_CONNECTOR* unaccepted[SD_MAX_CONNECTIONS];
        ULONG count = 0;
        KLOCK_QUEUE_HANDLE lock;
        KeAcquireInStackQueuedSpinLock(&g_Sd.IncomingLock, &lock);
        for (i = g_Sd.ServedCount; i < g_Sd.IncomingCount; ++i) unaccepted[count++] = g_Sd.Incoming[i];
        g_Sd.IncomingCount = SD_MAX_CONNECTIONS; /* later connect events are rejected */
        KeReleaseInStackQueuedSpinLock(&lock);
        for (i = 0; i < count; ++i) {
            unaccepted[i]->Dispatch->NdkReject(unaccepted[i], NULL, 0);
            SdClose(&unaccepted[i]->Header, unaccepted[i]->Dispatch->NdkCloseConnector);
        }
    }
    if (g_Sd.Listener != NULL) SdClose(&g_Sd.Listener->Header, g_Sd.Listener->Dispatch->NdkCloseListener);
    if (g_Sd.ListenAdapter != NULL) g_Sd.Ndk.WskCloseNdkAdapter(g_Sd.WskProvider.Client, g_Sd.ListenAdapter);
    if (g_Sd.StoreMdl != NULL) IoFreeMdl(g_Sd.StoreMdl);
    if (g_Sd.Store != NULL) ExFreePoolWithTag(g_Sd.Store, SD_TAG);
    for (i = 0; i < SD_MAX_CONNECTIONS; ++i)
        if (g_Sd.Served[i].Worker != NULL) IoFreeWorkItem(g_Sd.Served[i].Worker);
    if (g_Sd.AcceptItem != NULL) IoFreeWorkItem(g_Sd.AcceptItem);
    if (g_Sd.ClientItem != NULL) IoFreeWorkItem(g_Sd.ClientItem);
    if (g_Sd.WskCaptured) WskReleaseProviderNPI(&g_Sd.WskRegistration);
    WskDeregister(&g_Sd.WskRegistration);
    if (g_Sd.Device != NULL) IoDeleteDevice(g_Sd.Device);
}

static VOID SdUnload(PDRIVER_OBJECT DriverObject) {
    UNREFERENCED_PARAMETER(DriverObject);
    PAGED_CODE();
    KeSetEvent(&g_Sd.Stop, IO_NO_INCREMENT, FALSE); /* every wait of a worker ends */
    ExWaitForRundownProtectionRelease(&g_Sd.Rundown);
    SdTearDown();
    SdLog("smbdlite: unloaded\n");
}

NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath) {
    UNICODE_STRING name;
    SIZE_T returned = 0;
    ULONG i, workers = 0;
    NTSTATUS status;
    PAGED_CODE();
    RtlZeroMemory(&g_Sd, sizeof(g_Sd));
    KeInitializeEvent(&g_Sd.Stop, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Sd.Listening, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Sd.ClientDone, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Sd.ServerDone, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Sd.IncomingEvent, SynchronizationEvent, FALSE);
    KeInitializeSpinLock(&g_Sd.IncomingLock);
    ExInitializeRundownProtection(&g_Sd.Rundown);
    for (i = 0; i < SD_CHANNELS; ++i) {
        KeInitializeEvent(&g_Sd.Channels[i].CqEvent, NotificationEvent, FALSE);
        KeInitializeEvent(&g_Sd.Channels[i].Disconnected, NotificationEvent, FALSE);
    }
    for (i = 0; i < SD_MAX_CONNECTIONS; ++i) {
        KeInitializeEvent(&g_Sd.Served[i].CqEvent, NotificationEvent, FALSE);
        KeInitializeEvent(&g_Sd.Served[i].Disconnected, NotificationEvent, FALSE);
        KeInitializeEvent(&g_Sd.Served[i].WorkerDone, NotificationEvent, FALSE);
    }
    status = SdReadParameters(RegistryPath);
    if (!NT_SUCCESS(status)) {
        SdLog("smbdlite: bad parameters: 0x%08X\n", status);
        return status;
    }
    RtlInitUnicodeString(&name, L"\\Device\\SmbdLite");
    status = IoCreateDeviceSecure(DriverObject, 0, &name, FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN, FALSE,
                                  &SDDL_DEVOBJ_SYS_ALL_ADM_ALL, NULL, &g_Sd.Device);
    if (!NT_SUCCESS(status)) return status;
    DriverObject->MajorFunction[IRP_MJ_CREATE] = SdDispatchCreateClose;
    DriverObject->MajorFunction[IRP_MJ_CLOSE] = SdDispatchCreateClose;
    DriverObject->MajorFunction[IRP_MJ_DEVICE_CONTROL] = SdDispatchDeviceControl;
    g_Sd.WskClientDispatch.Version = MAKE_WSK_VERSION(1, 0);
    g_Sd.WskClient.Dispatch = &g_Sd.WskClientDispatch;
    status = WskRegister(&g_Sd.WskClient, &g_Sd.WskRegistration);
    if (!NT_SUCCESS(status)) {
        IoDeleteDevice(g_Sd.Device);
        return status;
    }
    status = WskCaptureProviderNPI(&g_Sd.WskRegistration, WSK_INFINITE_WAIT, &g_Sd.WskProvider);
    if (NT_SUCCESS(status)) {
        g_Sd.WskCaptured = TRUE;
        status =
            g_Sd.WskProvider.Dispatch->WskControlClient(g_Sd.WskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH,
                                                        0, NULL, sizeof(g_Sd.Ndk), &g_Sd.Ndk, &returned, NULL);
    }
    if (NT_SUCCESS(status) && g_Sd.Role != SdRoleClient) status = SdInterfaceOf(g_Sd.Address, &g_Sd.ServerIfIndex);
    if (NT_SUCCESS(status) && g_Sd.Role != SdRoleServer) status = SdInterfaceOf(g_Sd.LocalAddress, &g_Sd.ClientIfIndex);
    if (NT_SUCCESS(status) && g_Sd.Role != SdRoleClient) {
        status = SdAllocate(NULL, SD_FILE_SIZE, &g_Sd.Store, &g_Sd.StoreMdl, NULL, NULL);
        for (i = 0; NT_SUCCESS(status) && i < SD_MAX_CONNECTIONS; ++i) {
            g_Sd.Served[i].Worker = IoAllocateWorkItem(g_Sd.Device);
            if (g_Sd.Served[i].Worker == NULL) status = STATUS_INSUFFICIENT_RESOURCES;
        }
        g_Sd.AcceptItem = IoAllocateWorkItem(g_Sd.Device);
        if (g_Sd.AcceptItem == NULL) status = STATUS_INSUFFICIENT_RESOURCES;
    }
    if (NT_SUCCESS(status) && g_Sd.Role != SdRoleServer) {
        g_Sd.ClientItem = IoAllocateWorkItem(g_Sd.Device);
        if (g_Sd.ClientItem == NULL) status = STATUS_INSUFFICIENT_RESOURCES;
    }
    if (!NT_SUCCESS(status)) {
        SdLog("smbdlite: DriverEntry failed: 0x%08X\n", status);
        SdTearDown();
        return status;
    }
    DriverObject->DriverUnload = SdUnload;
    if (g_Sd.Role == SdRoleClient) KeSetEvent(&g_Sd.Listening, IO_NO_INCREMENT, FALSE); /* the server is elsewhere */
    workers = (g_Sd.Role != SdRoleClient) + (g_Sd.Role != SdRoleServer);
    ExAcquireRundownProtectionEx(&g_Sd.Rundown, workers);
    if (g_Sd.Role != SdRoleClient) IoQueueWorkItem(g_Sd.AcceptItem, SdAcceptWorker, DelayedWorkQueue, NULL);
    if (g_Sd.Role != SdRoleServer) IoQueueWorkItem(g_Sd.ClientItem, SdClientWorker, DelayedWorkQueue, NULL);
    SdLog("smbdlite: loaded as %s, server interface %u, client interface %u, port %u\n",
          g_Sd.Role == SdRoleBoth     ? "server and client"
          : g_Sd.Role == SdRoleServer ? "server"
                                      : "client",
          g_Sd.ServerIfIndex, g_Sd.ClientIfIndex, g_Sd.Port);
    return STATUS_SUCCESS;
}
