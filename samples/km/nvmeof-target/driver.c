/*++

Module Name:

    driver.c

Abstract:

    nvmeof-target: an NVMe over Fabrics RDMA target with one RAM namespace, written as a Windows kernel driver
    is. DriverEntry reads its parameters, opens the adapter that holds Address through WskOpenNdkAdapter, makes
    one PD, the namespace (non-paged pool, registered once as an MR that RDMA Reads may fill), and listens. The
    connect event (DISPATCH_LEVEL) keeps the connector and queues the accept work item; connection.c serves each
    queue. DriverUnload stops listening, waits for every work item, tears down what is left and logs the
    namespace's checksum (FNV-1a over every byte), so that a test can compare it with what the host wrote.

    Parameters (RegistryPath\Parameters, softndk-kmhost --parameter): Address (127.0.0.1), Port (4420), Nqn
    (nqn.2026-12.io.softndk:ram), NamespaceBytes (8 MiB, a multiple of 128 KiB up to 256 MiB), BlockSize (512 or
    4096), MaxIoQueues (4, at most 7).

Environment:

    Kernel mode (softndk kernel layer).

--*/

#include "nvmeof_target.h"

NT_DRIVER g_Nt;

PCSTR NtStatusText(NTSTATUS Status) {
    switch (Status) {
        case STATUS_SUCCESS:
            return "success";
        case STATUS_CANCELLED:
            return "cancelled (flushed)";
        case STATUS_IO_TIMEOUT:
            return "timed out";
        case STATUS_CONNECTION_RESET:
            return "connection reset";
        case STATUS_CONNECTION_ABORTED:
            return "connection aborted";
        case STATUS_CONNECTION_DISCONNECTED:
            return "disconnected";
        case STATUS_INVALID_NETWORK_RESPONSE:
            return "the host broke the protocol";
        case STATUS_INSUFFICIENT_RESOURCES:
            return "out of resources";
        case STATUS_INVALID_PARAMETER:
            return "invalid parameter";
        case STATUS_ADDRESS_ALREADY_EXISTS:
            return "the port is taken";
        case STATUS_NOT_FOUND:
            return "not found";
        case STATUS_ACCESS_VIOLATION:
            return "access violation";
        default:
            return "see ntstatus.h";
    }
}

VOID NtInitWait(PNT_WAIT Wait) {
    KeInitializeEvent(&Wait->Event, NotificationEvent, FALSE);
    Wait->Status = STATUS_PENDING;
    Wait->Object = NULL;
}

VOID NtCreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* Object) {
    PNT_WAIT wait = (PNT_WAIT)Context;
    wait->Status = Status;
    wait->Object = Object;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

VOID NtRequestDone(PVOID Context, NTSTATUS Status) {
    PNT_WAIT wait = (PNT_WAIT)Context;
    wait->Status = Status;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

static VOID NtCloseDone(PVOID Context) {
    KeSetEvent(&((PNT_WAIT)Context)->Event, IO_NO_INCREMENT, FALSE);
}

NTSTATUS NtFinish(NTSTATUS Status, PNT_WAIT Wait) {
    PAGED_CODE();
    if (Status != STATUS_PENDING) return Status;
    KeWaitForSingleObject(&Wait->Event, Executive, KernelMode, FALSE, NULL);
    return Wait->Status;
}

NTSTATUS NtFinishCreate(NTSTATUS Status, PNT_WAIT Wait, PVOID* Object) {
    if (Status == STATUS_PENDING) {
        Status = NtFinish(Status, Wait);
        if (NT_SUCCESS(Status)) *Object = Wait->Object;
    }
    return Status;
}

VOID NtClose(NDK_OBJECT_HEADER* Object, NDK_FN_CLOSE_OBJECT Close) {
    NT_WAIT wait;
    PAGED_CODE();
    NtInitWait(&wait);
    if (Close(Object, NtCloseDone, &wait) == STATUS_PENDING)
        KeWaitForSingleObject(&wait.Event, Executive, KernelMode, FALSE, NULL);
}

ULONG NtChecksum(const UCHAR* Data, SIZE_T Length) {
    ULONG hash = 2166136261u;
    SIZE_T i;
    for (i = 0; i < Length; ++i) hash = (hash ^ Data[i]) * 16777619u;
    return hash;
}

/* ---- connections arriving --------------------------------------------------------------------------------- */

static VOID NtCloseIgnored(PVOID Context) {
    UNREFERENCED_PARAMETER(Context);
}

static VOID NtConnectEvent(PVOID Context, NDK_CONNECTOR* Connector) {
    KLOCK_QUEUE_HANDLE lock;
    BOOLEAN kept = FALSE;
    UNREFERENCED_PARAMETER(Context);
    KeAcquireInStackQueuedSpinLock(&g_Nt.Lock, &lock);
    if (!g_Nt.Closing && g_Nt.PendingCount < NT_MAX_CONNECTIONS) {
        g_Nt.Pending[g_Nt.PendingCount++] = Connector;
        kept = TRUE;
    }
    KeReleaseInStackQueuedSpinLock(&lock);
    if (!kept) { /* DISPATCH_LEVEL: no waiting for the close */
        Connector->Dispatch->NdkReject(Connector, NULL, 0);
        Connector->Dispatch->NdkCloseConnector(&Connector->Header, NtCloseIgnored, NULL);
        return;
    }
    if (InterlockedExchange(&g_Nt.AcceptState, 2) == 0) {
        if (ExAcquireRundownProtection(&g_Nt.Rundown))
            IoQueueWorkItem(g_Nt.AcceptItem, NtAcceptWorker, DelayedWorkQueue, NULL);
        else
            InterlockedExchange(&g_Nt.AcceptState, 0);
    }
}

VOID NtAcceptWorker(PDEVICE_OBJECT Device, PVOID Context) {
    UNREFERENCED_PARAMETER(Device);
    UNREFERENCED_PARAMETER(Context);
    do {
        InterlockedExchange(&g_Nt.AcceptState, 1);
        for (;;) {
            NDK_CONNECTOR* connector = NULL;
            KLOCK_QUEUE_HANDLE lock;
            KeAcquireInStackQueuedSpinLock(&g_Nt.Lock, &lock);
            if (g_Nt.PendingCount > 0) connector = g_Nt.Pending[--g_Nt.PendingCount];
            KeReleaseInStackQueuedSpinLock(&lock);
            if (connector == NULL) break;
            NtAccept(connector);
        }
    } while (InterlockedCompareExchange(&g_Nt.AcceptState, 0, 1) != 1);
    ExReleaseRundownProtection(&g_Nt.Rundown);
}

/* ---- parameters ------------------------------------------------------------------------------------------- */

static NTSTATUS NtQueryParameter(HANDLE Key, PCWSTR Name, ULONG Type, PVOID Buffer, ULONG Size) {
    UCHAR storage[sizeof(KEY_VALUE_PARTIAL_INFORMATION) + 256 * sizeof(WCHAR)];
    PKEY_VALUE_PARTIAL_INFORMATION value = (PKEY_VALUE_PARTIAL_INFORMATION)storage;
    UNICODE_STRING name;
    ULONG length = 0;
    NTSTATUS status;
    RtlInitUnicodeString(&name, Name);
    status = ZwQueryValueKey(Key, &name, KeyValuePartialInformation, value, sizeof(storage), &length);
    if (status == STATUS_OBJECT_NAME_NOT_FOUND) return STATUS_SUCCESS;
    if (!NT_SUCCESS(status)) return status;
    if (value->Type != Type || value->DataLength > Size) {
        NtLog("nvmeof-target: parameter %ls: wrong type or too long\n", Name);
        return STATUS_INVALID_PARAMETER;
    }
    RtlCopyMemory(Buffer, value->Data, value->DataLength);
    return STATUS_SUCCESS;
}

static NTSTATUS NtReadParameters(PUNICODE_STRING RegistryPath) {
    static const WCHAR parameters[] = L"\\Parameters";
    UNICODE_STRING path;
    OBJECT_ATTRIBUTES attributes;
    HANDLE key = NULL;
    WCHAR address[32] = {0}, nqn[224] = {0};
    ULONG port = 4420, i;
    PCWSTR end = NULL;
    NTSTATUS status;
    PAGED_CODE();
    g_Nt.Address.S_un.S_addr = RtlUlongByteSwap(0x7F000001);
    g_Nt.NamespaceBytes = 8 * 1024 * 1024;
    g_Nt.BlockSize = 512;
    g_Nt.MaxIoQueues = 4;
    RtlStringCbCopyA(g_Nt.SubsystemNqn, sizeof(g_Nt.SubsystemNqn), "nqn.2026-12.io.softndk:ram");
    path.Length = 0;
    path.MaximumLength = (USHORT)(RegistryPath->Length + sizeof(parameters));
    path.Buffer = (PWCH)ExAllocatePool2(POOL_FLAG_PAGED, path.MaximumLength, NT_TAG);
    if (path.Buffer == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    RtlCopyUnicodeString(&path, RegistryPath);
    status = RtlAppendUnicodeToString(&path, parameters);
    if (NT_SUCCESS(status)) {
        InitializeObjectAttributes(&attributes, &path, OBJ_CASE_INSENSITIVE | OBJ_KERNEL_HANDLE, NULL, NULL);
        status = ZwOpenKey(&key, KEY_READ, &attributes);
    }
    ExFreePoolWithTag(path.Buffer, NT_TAG);
    if (status == STATUS_OBJECT_NAME_NOT_FOUND) status = STATUS_SUCCESS;
    if (!NT_SUCCESS(status)) return status;
    if (key != NULL) {
        status = NtQueryParameter(key, L"Address", REG_SZ, address, sizeof(address) - sizeof(WCHAR));
        if (NT_SUCCESS(status)) status = NtQueryParameter(key, L"Nqn", REG_SZ, nqn, sizeof(nqn) - sizeof(WCHAR));
        if (NT_SUCCESS(status)) status = NtQueryParameter(key, L"Port", REG_DWORD, &port, sizeof(port));
        if (NT_SUCCESS(status))
            status =
                NtQueryParameter(key, L"NamespaceBytes", REG_DWORD, &g_Nt.NamespaceBytes, sizeof(g_Nt.NamespaceBytes));
        if (NT_SUCCESS(status))
            status = NtQueryParameter(key, L"BlockSize", REG_DWORD, &g_Nt.BlockSize, sizeof(g_Nt.BlockSize));
        if (NT_SUCCESS(status))
            status = NtQueryParameter(key, L"MaxIoQueues", REG_DWORD, &g_Nt.MaxIoQueues, sizeof(g_Nt.MaxIoQueues));
        ZwClose(key);
        if (!NT_SUCCESS(status)) return status;
    }
    if (address[0] != 0) {
        status = RtlIpv4StringToAddressW(address, TRUE, &end, &g_Nt.Address);
        if (!NT_SUCCESS(status) || *end != 0) {
            NtLog("nvmeof-target: parameter Address \"%ls\": an IPv4 address\n", address);
            return STATUS_INVALID_PARAMETER;
        }
    }
    for (i = 0; nqn[i] != 0; ++i) {
        if (nqn[i] < 0x21 || nqn[i] > 0x7E) {
            NtLog("nvmeof-target: parameter Nqn: printable ASCII without spaces\n");
            return STATUS_INVALID_PARAMETER;
        }
        g_Nt.SubsystemNqn[i] = (CHAR)nqn[i];
        g_Nt.SubsystemNqn[i + 1] = 0;
    }
    if (port == 0 || port > 0xFFFF) {
        NtLog("nvmeof-target: parameter Port %u: from 1 to 65535\n", port);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Nt.NamespaceBytes == 0 || g_Nt.NamespaceBytes % NT_MAX_TRANSFER != 0 ||
        g_Nt.NamespaceBytes > 256u * 1024 * 1024) {
        NtLog("nvmeof-target: parameter NamespaceBytes %u: a multiple of %u up to 268435456\n", g_Nt.NamespaceBytes,
              NT_MAX_TRANSFER);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Nt.BlockSize != 512 && g_Nt.BlockSize != 4096) {
        NtLog("nvmeof-target: parameter BlockSize %u: 512 or 4096\n", g_Nt.BlockSize);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Nt.MaxIoQueues == 0 || g_Nt.MaxIoQueues > NT_MAX_CONNECTIONS - 1) {
        NtLog("nvmeof-target: parameter MaxIoQueues %u: from 1 to %u\n", g_Nt.MaxIoQueues, NT_MAX_CONNECTIONS - 1);
        return STATUS_INVALID_PARAMETER;
    }
    g_Nt.Port = (USHORT)port;
    return STATUS_SUCCESS;
}

static NTSTATUS NtInterfaceOf(IN_ADDR Address, NET_IFINDEX* IfIndex) {
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

/* ---- DriverEntry / DriverUnload --------------------------------------------------------------------------- */

/* The adapter, the PD, the namespace registered once, the listener. */
static NTSTATUS NtStart(void) {
    NDK_VERSION version = {2, 0};
    SOCKADDR_IN address;
    NT_WAIT wait;
    NTSTATUS status;
    PAGED_CODE();
    status = g_Nt.Ndk.WskOpenNdkAdapter(g_Nt.WskProvider.Client, version, g_Nt.IfIndex, &g_Nt.Adapter);
    if (!NT_SUCCESS(status)) return status;
    NtInitWait(&wait);
    status = NtFinishCreate(g_Nt.Adapter->Dispatch->NdkCreatePd(g_Nt.Adapter, NtCreateDone, &wait, &g_Nt.Pd), &wait,
                            (PVOID*)&g_Nt.Pd);
    if (!NT_SUCCESS(status)) return status;
    g_Nt.Ram = (PUCHAR)ExAllocatePool2(POOL_FLAG_NON_PAGED, g_Nt.NamespaceBytes, NT_TAG);
    if (g_Nt.Ram == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    g_Nt.RamMdl = IoAllocateMdl(g_Nt.Ram, g_Nt.NamespaceBytes, FALSE, FALSE, NULL);
    if (g_Nt.RamMdl == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    MmBuildMdlForNonPagedPool(g_Nt.RamMdl);
    NtInitWait(&wait);
    status = NtFinishCreate(g_Nt.Pd->Dispatch->NdkCreateMr(g_Nt.Pd, FALSE, NtCreateDone, &wait, &g_Nt.RamMr), &wait,
                            (PVOID*)&g_Nt.RamMr);
    if (!NT_SUCCESS(status)) return status;
    NtInitWait(&wait);
    status = NtFinish(g_Nt.RamMr->Dispatch->NdkRegisterMr(g_Nt.RamMr, g_Nt.RamMdl, g_Nt.NamespaceBytes,
                                                          NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK,
                                                          NtRequestDone, &wait),
                      &wait);
    if (!NT_SUCCESS(status)) return status;
    g_Nt.RamToken = g_Nt.RamMr->Dispatch->NdkGetLocalTokenFromMr(g_Nt.RamMr);
    NtInitWait(&wait);
    status = NtFinishCreate(g_Nt.Adapter->Dispatch->NdkCreateListener(g_Nt.Adapter, NtConnectEvent, NULL, NtCreateDone,
                                                                      &wait, &g_Nt.Listener),
                            &wait, (PVOID*)&g_Nt.Listener);
    if (!NT_SUCCESS(status)) return status;
    RtlZeroMemory(&address, sizeof(address));
    address.sin_family = AF_INET;
    address.sin_port = RtlUshortByteSwap(g_Nt.Port);
    address.sin_addr = g_Nt.Address;
    NtInitWait(&wait);
    return NtFinish(g_Nt.Listener->Dispatch->NdkListen(g_Nt.Listener, (CONST PSOCKADDR)&address, sizeof(address),
                                                       NtRequestDone, &wait),
                    &wait);
}

/* Everything DriverEntry made, in reverse; also DriverEntry's failure path. */
static VOID NtTearDown(void) {
    ULONG i;
    KLOCK_QUEUE_HANDLE lock;
    NDK_CONNECTOR* pending[NT_MAX_CONNECTIONS];
    ULONG count = 0;
    PAGED_CODE();
    KeAcquireInStackQueuedSpinLock(&g_Nt.Lock, &lock);
    g_Nt.Closing = TRUE; /* no connector is kept from now on */
    for (i = 0; i < g_Nt.PendingCount; ++i) pending[count++] = g_Nt.Pending[i];
    g_Nt.PendingCount = 0;
    KeReleaseInStackQueuedSpinLock(&lock);
    if (g_Nt.Listener != NULL) NtClose(&g_Nt.Listener->Header, g_Nt.Listener->Dispatch->NdkCloseListener);
    g_Nt.Listener = NULL;
    for (i = 0; i < count; ++i) {
        pending[i]->Dispatch->NdkReject(pending[i], NULL, 0);
        NtClose(&pending[i]->Header, pending[i]->Dispatch->NdkCloseConnector);
    }
    for (i = 0; i < NT_MAX_CONNECTIONS; ++i) {
        if (!g_Nt.Connections[i].InUse) continue;
        NtTearDownConnection(&g_Nt.Connections[i]);
        g_Nt.Connections[i].InUse = FALSE;
    }
    if (g_Nt.Ram != NULL)
        NtLog("nvmeof-target: namespace checksum 0x%08X over %u bytes\n", NtChecksum(g_Nt.Ram, g_Nt.NamespaceBytes),
              g_Nt.NamespaceBytes);
    if (g_Nt.RamMr != NULL) NtClose(&g_Nt.RamMr->Header, g_Nt.RamMr->Dispatch->NdkCloseMr);
    if (g_Nt.RamMdl != NULL) IoFreeMdl(g_Nt.RamMdl);
    if (g_Nt.Ram != NULL) ExFreePoolWithTag(g_Nt.Ram, NT_TAG);
    if (g_Nt.Pd != NULL) NtClose(&g_Nt.Pd->Header, g_Nt.Pd->Dispatch->NdkClosePd);
    if (g_Nt.Adapter != NULL) g_Nt.Ndk.WskCloseNdkAdapter(g_Nt.WskProvider.Client, g_Nt.Adapter);
    for (i = 0; i < NT_MAX_CONNECTIONS; ++i)
        if (g_Nt.Connections[i].Item != NULL) IoFreeWorkItem(g_Nt.Connections[i].Item);
    if (g_Nt.AcceptItem != NULL) IoFreeWorkItem(g_Nt.AcceptItem);
    if (g_Nt.WskCaptured) WskReleaseProviderNPI(&g_Nt.WskRegistration);
    WskDeregister(&g_Nt.WskRegistration);
    if (g_Nt.Device != NULL) IoDeleteDevice(g_Nt.Device);
}

static VOID NtUnload(PDRIVER_OBJECT DriverObject) {
    KLOCK_QUEUE_HANDLE lock;
    UNREFERENCED_PARAMETER(DriverObject);
    PAGED_CODE();
    KeAcquireInStackQueuedSpinLock(&g_Nt.Lock, &lock);
    g_Nt.Closing = TRUE;
    KeReleaseInStackQueuedSpinLock(&lock);
    ExWaitForRundownProtectionRelease(&g_Nt.Rundown); /* no work item runs, none is queued from here on */
    NtTearDown();
    NtLog("nvmeof-target: unloaded\n");
}

static NTSTATUS NtDispatchCreateClose(PDEVICE_OBJECT Device, PIRP Irp) {
    UNREFERENCED_PARAMETER(Device);
    Irp->IoStatus.Status = STATUS_SUCCESS;
    Irp->IoStatus.Information = 0;
    IoCompleteRequest(Irp, IO_NO_INCREMENT);
    return STATUS_SUCCESS;
}

NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath) {
    UNICODE_STRING name;
    SIZE_T returned = 0;
    ULONG i;
    NTSTATUS status;
    PAGED_CODE();
    RtlZeroMemory(&g_Nt, sizeof(g_Nt));
    KeInitializeSpinLock(&g_Nt.Lock);
    ExInitializeRundownProtection(&g_Nt.Rundown);
    status = NtReadParameters(RegistryPath);
    if (!NT_SUCCESS(status)) return status;
    RtlInitUnicodeString(&name, L"\\Device\\NvmeofTarget");
    status = IoCreateDeviceSecure(DriverObject, 0, &name, FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN, FALSE,
                                  &SDDL_DEVOBJ_SYS_ALL_ADM_ALL, NULL, &g_Nt.Device);
    if (!NT_SUCCESS(status)) return status;
    DriverObject->MajorFunction[IRP_MJ_CREATE] = NtDispatchCreateClose;
    DriverObject->MajorFunction[IRP_MJ_CLOSE] = NtDispatchCreateClose;
    g_Nt.WskClientDispatch.Version = MAKE_WSK_VERSION(1, 0);
    g_Nt.WskClient.Dispatch = &g_Nt.WskClientDispatch;
    status = WskRegister(&g_Nt.WskClient, &g_Nt.WskRegistration);
    if (!NT_SUCCESS(status)) {
        IoDeleteDevice(g_Nt.Device);
        return status;
    }
    status = WskCaptureProviderNPI(&g_Nt.WskRegistration, WSK_INFINITE_WAIT, &g_Nt.WskProvider);
    if (NT_SUCCESS(status)) {
        g_Nt.WskCaptured = TRUE;
        status =
            g_Nt.WskProvider.Dispatch->WskControlClient(g_Nt.WskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH,
                                                        0, NULL, sizeof(g_Nt.Ndk), &g_Nt.Ndk, &returned, NULL);
    }
    if (NT_SUCCESS(status)) status = NtInterfaceOf(g_Nt.Address, &g_Nt.IfIndex);
    for (i = 0; NT_SUCCESS(status) && i < NT_MAX_CONNECTIONS; ++i) {
        g_Nt.Connections[i].Index = i;
        g_Nt.Connections[i].Item = IoAllocateWorkItem(g_Nt.Device);
        if (g_Nt.Connections[i].Item == NULL) status = STATUS_INSUFFICIENT_RESOURCES;
    }
    if (NT_SUCCESS(status)) {
        g_Nt.AcceptItem = IoAllocateWorkItem(g_Nt.Device);
        if (g_Nt.AcceptItem == NULL) status = STATUS_INSUFFICIENT_RESOURCES;
    }
    if (NT_SUCCESS(status)) status = NtStart();
    if (!NT_SUCCESS(status)) {
        NtLog("nvmeof-target: DriverEntry failed: 0x%08X (%s)\n", status, NtStatusText(status));
        NtTearDown();
        return status;
    }
    DriverObject->DriverUnload = NtUnload;
    NtLog(
        "nvmeof-target: listening on port %u (interface %u): subsystem %s, namespace 1 of %u bytes in %u-byte "
        "blocks, up to %u I/O queues\n",
        g_Nt.Port, g_Nt.IfIndex, g_Nt.SubsystemNqn, g_Nt.NamespaceBytes, g_Nt.BlockSize, g_Nt.MaxIoQueues);
    return STATUS_SUCCESS;
}
