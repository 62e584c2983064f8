/*++

Module Name:

    driver.c

Abstract:

    smbdirect-client's DriverEntry and DriverUnload: parameters from the registry, WSK registration and the NDK
    dispatch it hands out, the adapter that holds LocalAddress and one PD; the waits and buffers every other file
    uses; and the teardown of all of it, in reverse, once the client worker has left.

    Parameters (REG_SZ unless said): Address (the server, IPv4, default 127.0.0.1), LocalAddress (default Address),
    Port (REG_DWORD, default 5445, SMB Direct's iWARP port), Share (default "share"), User and Password (default:
    none, a guest session; with a user, NTLMv2 and every message signed), Files (REG_DWORD, 1 to 8, default 2),
    LargestIo (REG_DWORD, 4096 to 8 MiB, default 8 MiB) and Invalidate (both, local or remote: who invalidates each
    I/O's first MR). Benchmark (REG_DWORD, 1: timed loops of 1 MiB WRITE, 1 MiB READ and 4 KiB READ, one at a time,
    instead of the checked files) and BenchSeconds (REG_DWORD, 1 to 600, default 3, per loop).

Environment:

    Kernel mode (softndk kernel layer).

--*/

#include "smbdirect_client.h"

SC_DRIVER g_Sc;

/* ---- waits and objects ----------------------------------------------------------------------------------- */

PCSTR ScStatusText(NTSTATUS Status) {
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
            return "the server broke the protocol";
        case STATUS_INSUFFICIENT_RESOURCES:
            return "out of resources";
        case STATUS_INVALID_PARAMETER:
            return "invalid parameter";
        case STATUS_DATA_ERROR:
            return "data differs from what was written";
        case STATUS_NOT_SUPPORTED:
            return "not supported";
        case STATUS_ACCESS_DENIED:
            return "access denied";
        case STATUS_LOGON_FAILURE:
            return "logon failure";
        case STATUS_BAD_NETWORK_NAME:
            return "no such share";
        case STATUS_OBJECT_NAME_NOT_FOUND:
            return "no such file";
        case STATUS_END_OF_FILE:
            return "end of file";
        case STATUS_NOT_FOUND:
            return "not found";
        case STATUS_DEVICE_BUSY:
            return "no free send slot";
        default:
            return "see ntstatus.h";
    }
}

VOID ScStep(PCSTR Step, NTSTATUS Status) {
    ScLog("smbdirect-client: %s: 0x%08X (%s)\n", Step, Status, ScStatusText(Status));
}

VOID ScInitWait(PSC_WAIT Wait) {
    KeInitializeEvent(&Wait->Event, NotificationEvent, FALSE);
    Wait->Status = STATUS_PENDING;
    Wait->Object = NULL;
}

VOID ScCreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* Object) {
    PSC_WAIT wait = (PSC_WAIT)Context;
    wait->Status = Status;
    wait->Object = Object;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

VOID ScRequestDone(PVOID Context, NTSTATUS Status) {
    PSC_WAIT wait = (PSC_WAIT)Context;
    wait->Status = Status;
    KeSetEvent(&wait->Event, IO_NO_INCREMENT, FALSE);
}

static VOID ScCloseDone(PVOID Context) {
    KeSetEvent(&((PSC_WAIT)Context)->Event, IO_NO_INCREMENT, FALSE);
}

/* Event, or DriverUnload's stop; STATUS_IO_TIMEOUT after Milliseconds. */
NTSTATUS ScWaitOrStop(PKEVENT Event, ULONG Milliseconds) {
    PVOID objects[2];
    LARGE_INTEGER timeout;
    NTSTATUS status;
    objects[0] = Event;
    objects[1] = &g_Sc.Stop;
    timeout.QuadPart = -(LONGLONG)Milliseconds * 10000;
    status = KeWaitForMultipleObjects(2, objects, WaitAny, Executive, KernelMode, FALSE, &timeout, NULL);
    if (status == STATUS_WAIT_0) return STATUS_SUCCESS;
    return status == STATUS_TIMEOUT ? STATUS_IO_TIMEOUT : STATUS_REQUEST_ABORTED;
}

/* A request that pended finishes on the provider's thread; its wait is bounded there (softndk's own timeouts). */
NTSTATUS ScFinish(NTSTATUS Status, PSC_WAIT Wait) {
    PAGED_CODE();
    if (Status != STATUS_PENDING) return Status;
    KeWaitForSingleObject(&Wait->Event, Executive, KernelMode, FALSE, NULL);
    return Wait->Status;
}

NTSTATUS ScFinishCreate(NTSTATUS Status, PSC_WAIT Wait, PVOID* Object) {
    if (Status == STATUS_PENDING) {
        Status = ScFinish(Status, Wait);
        if (NT_SUCCESS(Status)) *Object = Wait->Object;
    }
    return Status;
}

VOID ScClose(NDK_OBJECT_HEADER* Object, NDK_FN_CLOSE_OBJECT Close) {
    SC_WAIT wait;
    PAGED_CODE();
    ScInitWait(&wait);
    if (Close(Object, ScCloseDone, &wait) == STATUS_PENDING)
        KeWaitForSingleObject(&wait.Event, Executive, KernelMode, FALSE, NULL);
}

NTSTATUS ScAllocate(SIZE_T Length, SC_BUFFER* Buffer) {
    SC_WAIT wait;
    ULONG size;
    NTSTATUS status;
    RtlZeroMemory(Buffer, sizeof(*Buffer));
    Buffer->Length = Length;
    Buffer->Base = (PUCHAR)ExAllocatePool2(POOL_FLAG_NON_PAGED, Length, SC_TAG);
    if (Buffer->Base == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    Buffer->Mdl = IoAllocateMdl(Buffer->Base, (ULONG)Length, FALSE, FALSE, NULL);
    if (Buffer->Mdl == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    MmBuildMdlForNonPagedPool(Buffer->Mdl);
    size = NDK_LAM_SIZE(ADDRESS_AND_SIZE_TO_SPAN_PAGES(Buffer->Base, Length));
    Buffer->Lam = (PNDK_LOGICAL_ADDRESS_MAPPING)ExAllocatePool2(POOL_FLAG_NON_PAGED, size, SC_TAG);
    if (Buffer->Lam == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    ScInitWait(&wait);
    status = ScFinish(g_Sc.Adapter->Dispatch->NdkBuildLAM(g_Sc.Adapter, Buffer->Mdl, Length, ScRequestDone, &wait,
                                                          Buffer->Lam, &size, &Buffer->Fbo),
                      &wait);
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(Buffer->Lam, SC_TAG);
        Buffer->Lam = NULL;
    }
    return status;
}

VOID ScFree(SC_BUFFER* Buffer) {
    if (Buffer->Lam != NULL) {
        g_Sc.Adapter->Dispatch->NdkReleaseLAM(g_Sc.Adapter, Buffer->Lam);
        ExFreePoolWithTag(Buffer->Lam, SC_TAG);
    }
    if (Buffer->Mdl != NULL) IoFreeMdl(Buffer->Mdl);
    if (Buffer->Base != NULL) ExFreePoolWithTag(Buffer->Base, SC_TAG);
    RtlZeroMemory(Buffer, sizeof(*Buffer));
}

/* ---- parameters ------------------------------------------------------------------------------------------- */

static NTSTATUS ScQueryParameter(HANDLE Key, PCWSTR Name, ULONG Type, PVOID Buffer, ULONG Size) {
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
        ScLog("smbdirect-client: parameter %ls: wrong type or too long\n", Name);
        return STATUS_INVALID_PARAMETER;
    }
    RtlCopyMemory(Buffer, value->Data, value->DataLength);
    return STATUS_SUCCESS;
}

static BOOLEAN ScIs(PCWSTR Text, PCWSTR Word) {
    UNICODE_STRING a, b;
    RtlInitUnicodeString(&a, Text);
    RtlInitUnicodeString(&b, Word);
    return RtlEqualUnicodeString(&a, &b, TRUE);
}

static NTSTATUS ScParseAddress(PCWSTR Name, PCWSTR Text, IN_ADDR* Address) {
    PCWSTR end = NULL;
    NTSTATUS status = RtlIpv4StringToAddressW(Text, TRUE, &end, Address);
    if (!NT_SUCCESS(status) || *end != 0) {
        ScLog("smbdirect-client: parameter %ls \"%ls\": an IPv4 address\n", Name, Text);
        return STATUS_INVALID_PARAMETER;
    }
    return STATUS_SUCCESS;
}

static NTSTATUS ScReadParameters(PUNICODE_STRING RegistryPath) {
    static const WCHAR parameters[] = L"\\Parameters";
    UNICODE_STRING path;
    OBJECT_ATTRIBUTES attributes;
    HANDLE key = NULL;
    WCHAR address[32] = {0}, local[32] = {0}, user[64] = {0}, password[64] = {0}, invalidate[16] = {0};
    ULONG port = SMBD_IWARP_PORT, i;
    NTSTATUS status;
    PAGED_CODE();
    g_Sc.Address.S_un.S_addr = RtlUlongByteSwap(0x7F000001);
    g_Sc.Files = 2;
    g_Sc.LargestIo = SC_MAX_IO;
    g_Sc.BenchSeconds = 3;
    RtlStringCbCopyW(g_Sc.Share, sizeof(g_Sc.Share), L"share");
    path.Length = 0;
    path.MaximumLength = (USHORT)(RegistryPath->Length + sizeof(parameters));
    path.Buffer = (PWCH)ExAllocatePool2(POOL_FLAG_PAGED, path.MaximumLength, SC_TAG);
    if (path.Buffer == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    RtlCopyUnicodeString(&path, RegistryPath);
    status = RtlAppendUnicodeToString(&path, parameters);
    if (NT_SUCCESS(status)) {
        InitializeObjectAttributes(&attributes, &path, OBJ_CASE_INSENSITIVE | OBJ_KERNEL_HANDLE, NULL, NULL);
        status = ZwOpenKey(&key, KEY_READ, &attributes);
    }
    ExFreePoolWithTag(path.Buffer, SC_TAG);
    if (status == STATUS_OBJECT_NAME_NOT_FOUND) status = STATUS_SUCCESS;
    if (!NT_SUCCESS(status)) return status;
    if (key != NULL) {
        status = ScQueryParameter(key, L"Address", REG_SZ, address, sizeof(address) - sizeof(WCHAR));
        if (NT_SUCCESS(status))
            status = ScQueryParameter(key, L"LocalAddress", REG_SZ, local, sizeof(local) - sizeof(WCHAR));
        if (NT_SUCCESS(status))
            status = ScQueryParameter(key, L"Share", REG_SZ, g_Sc.Share, sizeof(g_Sc.Share) - sizeof(WCHAR));
        if (NT_SUCCESS(status)) status = ScQueryParameter(key, L"User", REG_SZ, user, sizeof(user) - sizeof(WCHAR));
        if (NT_SUCCESS(status))
            status = ScQueryParameter(key, L"Password", REG_SZ, password, sizeof(password) - sizeof(WCHAR));
        if (NT_SUCCESS(status))
            status = ScQueryParameter(key, L"Invalidate", REG_SZ, invalidate, sizeof(invalidate) - sizeof(WCHAR));
        if (NT_SUCCESS(status)) status = ScQueryParameter(key, L"Port", REG_DWORD, &port, sizeof(port));
        if (NT_SUCCESS(status)) status = ScQueryParameter(key, L"Files", REG_DWORD, &g_Sc.Files, sizeof(g_Sc.Files));
        if (NT_SUCCESS(status))
            status = ScQueryParameter(key, L"LargestIo", REG_DWORD, &g_Sc.LargestIo, sizeof(g_Sc.LargestIo));
        if (NT_SUCCESS(status))
            status = ScQueryParameter(key, L"Benchmark", REG_DWORD, &g_Sc.Benchmark, sizeof(g_Sc.Benchmark));
        if (NT_SUCCESS(status))
            status = ScQueryParameter(key, L"BenchSeconds", REG_DWORD, &g_Sc.BenchSeconds, sizeof(g_Sc.BenchSeconds));
        ZwClose(key);
        if (!NT_SUCCESS(status)) return status;
    }
    if (address[0] != 0 && !NT_SUCCESS(ScParseAddress(L"Address", address, &g_Sc.Address)))
        return STATUS_INVALID_PARAMETER;
    g_Sc.LocalAddress = g_Sc.Address;
    if (local[0] != 0 && !NT_SUCCESS(ScParseAddress(L"LocalAddress", local, &g_Sc.LocalAddress)))
        return STATUS_INVALID_PARAMETER;
    for (i = 0; user[i] != 0; ++i) {
        if (user[i] < 0x21 || user[i] > 0x7E) {
            ScLog("smbdirect-client: parameter User: printable ASCII without spaces\n");
            return STATUS_INVALID_PARAMETER;
        }
        g_Sc.User[i] = (CHAR)user[i];
    }
    for (i = 0; password[i] != 0; ++i) {
        if (password[i] < 0x20 || password[i] > 0x7E) {
            ScLog("smbdirect-client: parameter Password: printable ASCII\n");
            return STATUS_INVALID_PARAMETER;
        }
        g_Sc.Password[i] = (CHAR)password[i];
    }
    if (g_Sc.User[0] == 0 && g_Sc.Password[0] != 0) {
        ScLog("smbdirect-client: parameter Password without User: give both, or neither for a guest session\n");
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Sc.Share[0] == 0) {
        ScLog("smbdirect-client: parameter Share: a share name\n");
        return STATUS_INVALID_PARAMETER;
    }
    if (invalidate[0] != 0) {
        g_Sc.LocalInvalidateOnly = ScIs(invalidate, L"local");
        g_Sc.RemoteInvalidateOnly = ScIs(invalidate, L"remote");
        if (!g_Sc.LocalInvalidateOnly && !g_Sc.RemoteInvalidateOnly && !ScIs(invalidate, L"both")) {
            ScLog("smbdirect-client: parameter Invalidate \"%ls\": both, remote or local\n", invalidate);
            return STATUS_INVALID_PARAMETER;
        }
    }
    if (port == 0 || port > 0xFFFF) {
        ScLog("smbdirect-client: parameter Port %u: from 1 to 65535\n", port);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Sc.Files == 0 || g_Sc.Files > 8) {
        ScLog("smbdirect-client: parameter Files %u: from 1 to 8\n", g_Sc.Files);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Sc.LargestIo < PAGE_SIZE || g_Sc.LargestIo > SC_MAX_IO) {
        ScLog("smbdirect-client: parameter LargestIo %u: from %u to %u\n", g_Sc.LargestIo, PAGE_SIZE, SC_MAX_IO);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Sc.Benchmark > 1 || g_Sc.BenchSeconds == 0 || g_Sc.BenchSeconds > 600) {
        ScLog("smbdirect-client: parameters Benchmark %u (0 or 1), BenchSeconds %u (1 to 600)\n", g_Sc.Benchmark,
              g_Sc.BenchSeconds);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Sc.Benchmark && g_Sc.LargestIo < 1024 * 1024) {
        ScLog("smbdirect-client: parameter LargestIo %u: at least 1048576 with Benchmark=1\n", g_Sc.LargestIo);
        return STATUS_INVALID_PARAMETER;
    }
    g_Sc.Port = (USHORT)port;
    return STATUS_SUCCESS;
}

/* ---- the adapter ------------------------------------------------------------------------------------------- */

/* The interface that holds Address. */
static NTSTATUS ScInterfaceOf(IN_ADDR Address, NET_IFINDEX* IfIndex) {
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

static NTSTATUS ScOpenAdapter(void) {
    NDK_VERSION version = {2, 0};
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof(info);
    SC_WAIT wait;
    NTSTATUS status;
    PAGED_CODE();
    status = g_Sc.Ndk.WskOpenNdkAdapter(g_Sc.WskProvider.Client, version, g_Sc.IfIndex, &g_Sc.Adapter);
    if (!NT_SUCCESS(status)) return status;
    RtlZeroMemory(&info, sizeof(info));
    info.Version = version;
    status = g_Sc.Adapter->Dispatch->NdkQueryAdapterInfo(g_Sc.Adapter, &info, &size);
    if (!NT_SUCCESS(status)) return status;
    g_Sc.FrPages = info.FRMRPageCount;
    if (g_Sc.FrPages < 2 || (ULONG64)(g_Sc.FrPages - 1) * PAGE_SIZE * SC_MAX_MRS < g_Sc.LargestIo) {
        ScLog("smbdirect-client: the adapter's FRMRPageCount %u cannot cover LargestIo %u with %u MRs\n", g_Sc.FrPages,
              g_Sc.LargestIo, SC_MAX_MRS);
        return STATUS_NOT_SUPPORTED;
    }
    ScInitWait(&wait);
    return ScFinishCreate(g_Sc.Adapter->Dispatch->NdkCreatePd(g_Sc.Adapter, ScCreateDone, &wait, &g_Sc.Pd), &wait,
                          (PVOID*)&g_Sc.Pd);
}

/* Everything DriverEntry made, in reverse; also DriverEntry's failure path. */
static VOID ScTearDown(void) {
    PAGED_CODE();
    ScTearDownConnection();
    if (g_Sc.Pd != NULL) ScClose(&g_Sc.Pd->Header, g_Sc.Pd->Dispatch->NdkClosePd);
    g_Sc.Pd = NULL;
    if (g_Sc.Adapter != NULL) g_Sc.Ndk.WskCloseNdkAdapter(g_Sc.WskProvider.Client, g_Sc.Adapter);
    g_Sc.Adapter = NULL;
    if (g_Sc.ClientItem != NULL) IoFreeWorkItem(g_Sc.ClientItem);
    if (g_Sc.WskCaptured) WskReleaseProviderNPI(&g_Sc.WskRegistration);
    WskDeregister(&g_Sc.WskRegistration);
    if (g_Sc.Device != NULL) IoDeleteDevice(g_Sc.Device);
}

static VOID ScUnload(PDRIVER_OBJECT DriverObject) {
    UNREFERENCED_PARAMETER(DriverObject);
    PAGED_CODE();
    KeSetEvent(&g_Sc.Stop, IO_NO_INCREMENT, FALSE); /* every wait of the worker ends */
    ExWaitForRundownProtectionRelease(&g_Sc.Rundown);
    ScTearDown();
    ScLog("smbdirect-client: unloaded\n");
}

static NTSTATUS ScDispatchCreateClose(PDEVICE_OBJECT Device, PIRP Irp) {
    UNREFERENCED_PARAMETER(Device);
    Irp->IoStatus.Status = STATUS_SUCCESS;
    Irp->IoStatus.Information = 0;
    IoCompleteRequest(Irp, IO_NO_INCREMENT);
    return STATUS_SUCCESS;
}

NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath) {
    UNICODE_STRING name;
    SIZE_T returned = 0;
    NTSTATUS status;
    PAGED_CODE();
    RtlZeroMemory(&g_Sc, sizeof(g_Sc));
    KeInitializeEvent(&g_Sc.Stop, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Sc.ClientDone, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Sc.CqEvent, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Sc.Disconnected, NotificationEvent, FALSE);
    ExInitializeRundownProtection(&g_Sc.Rundown);
    status = ScReadParameters(RegistryPath);
    ScStep("parameters", status);
    if (!NT_SUCCESS(status)) return status;
    RtlInitUnicodeString(&name, L"\\Device\\SmbDirectClient");
    status = IoCreateDeviceSecure(DriverObject, 0, &name, FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN, FALSE,
                                  &SDDL_DEVOBJ_SYS_ALL_ADM_ALL, NULL, &g_Sc.Device);
    if (!NT_SUCCESS(status)) return status;
    DriverObject->MajorFunction[IRP_MJ_CREATE] = ScDispatchCreateClose;
    DriverObject->MajorFunction[IRP_MJ_CLOSE] = ScDispatchCreateClose;
    g_Sc.WskClientDispatch.Version = MAKE_WSK_VERSION(1, 0);
    g_Sc.WskClient.Dispatch = &g_Sc.WskClientDispatch;
    status = WskRegister(&g_Sc.WskClient, &g_Sc.WskRegistration);
    if (!NT_SUCCESS(status)) {
        IoDeleteDevice(g_Sc.Device);
        return status;
    }
    status = WskCaptureProviderNPI(&g_Sc.WskRegistration, WSK_INFINITE_WAIT, &g_Sc.WskProvider);
    if (NT_SUCCESS(status)) {
        g_Sc.WskCaptured = TRUE;
        status =
            g_Sc.WskProvider.Dispatch->WskControlClient(g_Sc.WskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH,
                                                        0, NULL, sizeof(g_Sc.Ndk), &g_Sc.Ndk, &returned, NULL);
    }
    if (NT_SUCCESS(status)) status = ScInterfaceOf(g_Sc.LocalAddress, &g_Sc.IfIndex);
    if (NT_SUCCESS(status)) {
        status = ScOpenAdapter();
        ScStep("WskOpenNdkAdapter (NDK 2.0) and a PD", status);
    }
    if (NT_SUCCESS(status)) {
        g_Sc.ClientItem = IoAllocateWorkItem(g_Sc.Device);
        if (g_Sc.ClientItem == NULL) status = STATUS_INSUFFICIENT_RESOURCES;
    }
    if (!NT_SUCCESS(status)) {
        ScLog("smbdirect-client: DriverEntry failed: 0x%08X (%s)\n", status, ScStatusText(status));
        ScTearDown();
        return status;
    }
    DriverObject->DriverUnload = ScUnload;
    ExAcquireRundownProtection(&g_Sc.Rundown);
    IoQueueWorkItem(g_Sc.ClientItem, ScClientWorker, DelayedWorkQueue, NULL);
    ScLog(
        "smbdirect-client: loaded: server port %u, share %ls, %s%s, %u files, I/O up to %u bytes, interface %u, "
        "%u pages per fast-register MR\n",
        g_Sc.Port, g_Sc.Share, g_Sc.User[0] ? "user " : "a guest session", g_Sc.User, g_Sc.Files, g_Sc.LargestIo,
        g_Sc.IfIndex, g_Sc.FrPages);
    return STATUS_SUCCESS;
}
