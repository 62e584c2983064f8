/*++

Module Name:

    driver.c

Abstract:

    nvmeof-host's DriverEntry and DriverUnload: parameters from the registry, WSK registration and the NDK
    dispatch it hands out, the adapter that holds LocalAddress, one PD for every queue, the work items; and the
    teardown of all of it, in reverse, once every worker has left.

Environment:

    Kernel mode (softndk kernel layer).

--*/

#include "nvmeof_host.h"

static NTSTATUS NhQueryParameter(HANDLE Key, PCWSTR Name, ULONG Type, PVOID Buffer, ULONG Size) {
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
        NhLog("nvmeof-host: parameter %ls: wrong type or too long\n", Name);
        return STATUS_INVALID_PARAMETER;
    }
    RtlCopyMemory(Buffer, value->Data, value->DataLength);
    return STATUS_SUCCESS;
}

static BOOLEAN NhIs(PCWSTR Text, PCWSTR Word) {
    UNICODE_STRING a, b;
    RtlInitUnicodeString(&a, Text);
    RtlInitUnicodeString(&b, Word);
    return RtlEqualUnicodeString(&a, &b, TRUE);
}

static NTSTATUS NhReadParameters(PUNICODE_STRING RegistryPath) {
    static const WCHAR parameters[] = L"\\Parameters";
    UNICODE_STRING path;
    OBJECT_ATTRIBUTES attributes;
    HANDLE key = NULL;
    WCHAR address[32] = {0}, local[32] = {0}, nqn[224] = {0}, invalidate[16] = {0};
    ULONG port = 4420, i;
    PCWSTR end = NULL;
    NTSTATUS status;
    PAGED_CODE();
    g_Nh.Address.S_un.S_addr = RtlUlongByteSwap(0x7F000001);
    g_Nh.IoQueues = 2;
    g_Nh.QueueDepth = 32;
    g_Nh.TestBytes = 4 * 1024 * 1024;
    g_Nh.BenchSeconds = 3;
    RtlStringCbCopyA(g_Nh.SubsystemNqn, sizeof(g_Nh.SubsystemNqn), "nqn.2026-12.io.softndk:ram");
    path.Length = 0;
    path.MaximumLength = (USHORT)(RegistryPath->Length + sizeof(parameters));
    path.Buffer = (PWCH)ExAllocatePool2(POOL_FLAG_PAGED, path.MaximumLength, NH_TAG);
    if (path.Buffer == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    RtlCopyUnicodeString(&path, RegistryPath);
    status = RtlAppendUnicodeToString(&path, parameters);
    if (NT_SUCCESS(status)) {
        InitializeObjectAttributes(&attributes, &path, OBJ_CASE_INSENSITIVE | OBJ_KERNEL_HANDLE, NULL, NULL);
        status = ZwOpenKey(&key, KEY_READ, &attributes);
    }
    ExFreePoolWithTag(path.Buffer, NH_TAG);
    if (status == STATUS_OBJECT_NAME_NOT_FOUND) status = STATUS_SUCCESS;
    if (!NT_SUCCESS(status)) return status;
    if (key != NULL) {
        status = NhQueryParameter(key, L"Address", REG_SZ, address, sizeof(address) - sizeof(WCHAR));
        if (NT_SUCCESS(status))
            status = NhQueryParameter(key, L"LocalAddress", REG_SZ, local, sizeof(local) - sizeof(WCHAR));
        if (NT_SUCCESS(status)) status = NhQueryParameter(key, L"Nqn", REG_SZ, nqn, sizeof(nqn) - sizeof(WCHAR));
        if (NT_SUCCESS(status))
            status = NhQueryParameter(key, L"Invalidate", REG_SZ, invalidate, sizeof(invalidate) - sizeof(WCHAR));
        if (NT_SUCCESS(status)) status = NhQueryParameter(key, L"Port", REG_DWORD, &port, sizeof(port));
        if (NT_SUCCESS(status))
            status = NhQueryParameter(key, L"IoQueues", REG_DWORD, &g_Nh.IoQueues, sizeof(g_Nh.IoQueues));
        if (NT_SUCCESS(status))
            status = NhQueryParameter(key, L"QueueDepth", REG_DWORD, &g_Nh.QueueDepth, sizeof(g_Nh.QueueDepth));
        if (NT_SUCCESS(status))
            status = NhQueryParameter(key, L"TestBytes", REG_DWORD, &g_Nh.TestBytes, sizeof(g_Nh.TestBytes));
        if (NT_SUCCESS(status))
            status = NhQueryParameter(key, L"Benchmark", REG_DWORD, &g_Nh.Benchmark, sizeof(g_Nh.Benchmark));
        if (NT_SUCCESS(status)) status = NhQueryParameter(key, L"Probe", REG_DWORD, &g_Nh.Probe, sizeof(g_Nh.Probe));
        if (NT_SUCCESS(status))
            status = NhQueryParameter(key, L"BenchSeconds", REG_DWORD, &g_Nh.BenchSeconds, sizeof(g_Nh.BenchSeconds));
        ZwClose(key);
        if (!NT_SUCCESS(status)) return status;
    }
    if (address[0] != 0) {
        status = RtlIpv4StringToAddressW(address, TRUE, &end, &g_Nh.Address);
        if (!NT_SUCCESS(status) || *end != 0) {
            NhLog("nvmeof-host: parameter Address \"%ls\": an IPv4 address\n", address);
            return STATUS_INVALID_PARAMETER;
        }
    }
    g_Nh.LocalAddress = g_Nh.Address;
    if (local[0] != 0) {
        status = RtlIpv4StringToAddressW(local, TRUE, &end, &g_Nh.LocalAddress);
        if (!NT_SUCCESS(status) || *end != 0) {
            NhLog("nvmeof-host: parameter LocalAddress \"%ls\": an IPv4 address\n", local);
            return STATUS_INVALID_PARAMETER;
        }
    }
    if (nqn[0] != 0) {
        for (i = 0; nqn[i] != 0; ++i) {
            if (nqn[i] < 0x21 || nqn[i] > 0x7E) { /* an NQN is printable ASCII */
                NhLog("nvmeof-host: parameter Nqn: printable ASCII without spaces\n");
                return STATUS_INVALID_PARAMETER;
            }
            g_Nh.SubsystemNqn[i] = (CHAR)nqn[i];
        }
        g_Nh.SubsystemNqn[i] = 0;
    }
    if (invalidate[0] != 0) {
        g_Nh.LocalInvalidateOnly = NhIs(invalidate, L"local");
        g_Nh.RemoteInvalidateOnly = NhIs(invalidate, L"remote");
        if (!g_Nh.LocalInvalidateOnly && !g_Nh.RemoteInvalidateOnly && !NhIs(invalidate, L"both")) {
            NhLog("nvmeof-host: parameter Invalidate \"%ls\": both, remote or local\n", invalidate);
            return STATUS_INVALID_PARAMETER;
        }
    }
    if (port == 0 || port > 0xFFFF) {
        NhLog("nvmeof-host: parameter Port %u: from 1 to 65535\n", port);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Nh.IoQueues == 0 || g_Nh.IoQueues > NH_MAX_IO_QUEUES) {
        NhLog("nvmeof-host: parameter IoQueues %u: from 1 to %u\n", g_Nh.IoQueues, NH_MAX_IO_QUEUES);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Nh.QueueDepth < 2 || g_Nh.QueueDepth > NH_MAX_DEPTH) {
        NhLog("nvmeof-host: parameter QueueDepth %u: from 2 to %u\n", g_Nh.QueueDepth, NH_MAX_DEPTH);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Nh.Probe > 1) {
        NhLog("nvmeof-host: parameter Probe %u: 0 or 1\n", g_Nh.Probe);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Nh.Benchmark > 1 || g_Nh.BenchSeconds == 0 || g_Nh.BenchSeconds > 600) {
        NhLog("nvmeof-host: parameters Benchmark %u (0 or 1), BenchSeconds %u (1 to 600)\n", g_Nh.Benchmark,
              g_Nh.BenchSeconds);
        return STATUS_INVALID_PARAMETER;
    }
    if (g_Nh.TestBytes < NH_MAX_TRANSFER) {
        NhLog("nvmeof-host: parameter TestBytes %u: at least %u\n", g_Nh.TestBytes, NH_MAX_TRANSFER);
        return STATUS_INVALID_PARAMETER;
    }
    g_Nh.Port = (USHORT)port;
    return STATUS_SUCCESS;
}

/* The interface that holds Address. */
static NTSTATUS NhInterfaceOf(IN_ADDR Address, NET_IFINDEX* IfIndex) {
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

static NTSTATUS NhOpenAdapter(void) {
    NDK_VERSION version = {2, 0};
    NH_WAIT wait;
    NTSTATUS status;
    PAGED_CODE();
    status = g_Nh.Ndk.WskOpenNdkAdapter(g_Nh.WskProvider.Client, version, g_Nh.IfIndex, &g_Nh.Adapter);
    if (!NT_SUCCESS(status)) return status;
    NhInitWait(&wait);
    return NhFinishCreate(g_Nh.Adapter->Dispatch->NdkCreatePd(g_Nh.Adapter, NhCreateDone, &wait, &g_Nh.Pd), &wait,
                          (PVOID*)&g_Nh.Pd);
}

/* Everything DriverEntry made, in reverse; also DriverEntry's failure path. */
static VOID NhTearDown(void) {
    ULONG q;
    PAGED_CODE();
    for (q = 0; q < NH_MAX_IO_QUEUES; ++q) NhTearDownQueue(&g_Nh.Io[q]);
    NhTearDownQueue(&g_Nh.Admin);
    if (g_Nh.Pd != NULL) NhClose(&g_Nh.Pd->Header, g_Nh.Pd->Dispatch->NdkClosePd);
    g_Nh.Pd = NULL;
    if (g_Nh.Adapter != NULL) g_Nh.Ndk.WskCloseNdkAdapter(g_Nh.WskProvider.Client, g_Nh.Adapter);
    g_Nh.Adapter = NULL;
    if (g_Nh.KeepAliveItem != NULL) IoFreeWorkItem(g_Nh.KeepAliveItem);
    if (g_Nh.HostItem != NULL) IoFreeWorkItem(g_Nh.HostItem);
    if (g_Nh.WskCaptured) WskReleaseProviderNPI(&g_Nh.WskRegistration);
    WskDeregister(&g_Nh.WskRegistration);
    if (g_Nh.Device != NULL) IoDeleteDevice(g_Nh.Device);
}

static VOID NhUnload(PDRIVER_OBJECT DriverObject) {
    UNREFERENCED_PARAMETER(DriverObject);
    PAGED_CODE();
    KeSetEvent(&g_Nh.Stop, IO_NO_INCREMENT, FALSE); /* every wait of a worker ends */
    KeCancelTimer(&g_Nh.KeepAliveTimer);
    KeFlushQueuedDpcs(); /* a DPC already queued has run before the driver goes */
    ExWaitForRundownProtectionRelease(&g_Nh.Rundown);
    NhTearDown();
    NhLog("nvmeof-host: unloaded\n");
}

static NTSTATUS NhDispatchCreateClose(PDEVICE_OBJECT Device, PIRP Irp) {
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
    RtlZeroMemory(&g_Nh, sizeof(g_Nh));
    KeInitializeEvent(&g_Nh.Stop, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Nh.HostDone, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Nh.KeepAliveDue, SynchronizationEvent, FALSE);
    KeInitializeEvent(&g_Nh.KeepAliveStop, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Nh.KeepAliveDone, NotificationEvent, FALSE);
    KeInitializeTimer(&g_Nh.KeepAliveTimer);
    KeInitializeDpc(&g_Nh.KeepAliveDpc, NhKeepAliveDpc, NULL);
    ExInitializeRundownProtection(&g_Nh.Rundown);
    KeInitializeEvent(&g_Nh.Admin.CqEvent, NotificationEvent, FALSE);
    KeInitializeEvent(&g_Nh.Admin.Disconnected, NotificationEvent, FALSE);
    for (i = 0; i < NH_MAX_IO_QUEUES; ++i) {
        KeInitializeEvent(&g_Nh.Io[i].CqEvent, NotificationEvent, FALSE);
        KeInitializeEvent(&g_Nh.Io[i].Disconnected, NotificationEvent, FALSE);
    }
    for (i = 0; i < sizeof(g_Nh.HostId); ++i) g_Nh.HostId[i] = (UCHAR)(0x5E + i * 7);
    status = NhReadParameters(RegistryPath);
    NhLog("nvmeof-host: parameters: 0x%08X (%s)\n", status, NhStatusText(status));
    if (!NT_SUCCESS(status)) return status;
    RtlInitUnicodeString(&name, L"\\Device\\NvmeofHost");
    status = IoCreateDeviceSecure(DriverObject, 0, &name, FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN, FALSE,
                                  &SDDL_DEVOBJ_SYS_ALL_ADM_ALL, NULL, &g_Nh.Device);
    if (!NT_SUCCESS(status)) return status;
    DriverObject->MajorFunction[IRP_MJ_CREATE] = NhDispatchCreateClose;
    DriverObject->MajorFunction[IRP_MJ_CLOSE] = NhDispatchCreateClose;
    g_Nh.WskClientDispatch.Version = MAKE_WSK_VERSION(1, 0);
    g_Nh.WskClient.Dispatch = &g_Nh.WskClientDispatch;
    status = WskRegister(&g_Nh.WskClient, &g_Nh.WskRegistration);
    if (!NT_SUCCESS(status)) {
        IoDeleteDevice(g_Nh.Device);
        return status;
    }
    status = WskCaptureProviderNPI(&g_Nh.WskRegistration, WSK_INFINITE_WAIT, &g_Nh.WskProvider);
    if (NT_SUCCESS(status)) {
        g_Nh.WskCaptured = TRUE;
        status =
            g_Nh.WskProvider.Dispatch->WskControlClient(g_Nh.WskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH,
                                                        0, NULL, sizeof(g_Nh.Ndk), &g_Nh.Ndk, &returned, NULL);
    }
    if (NT_SUCCESS(status)) status = NhInterfaceOf(g_Nh.LocalAddress, &g_Nh.IfIndex);
    if (NT_SUCCESS(status)) {
        status = NhOpenAdapter();
        NhStep("WskOpenNdkAdapter (NDK 2.0) and a PD", status);
    }
    if (NT_SUCCESS(status)) {
        g_Nh.HostItem = IoAllocateWorkItem(g_Nh.Device);
        g_Nh.KeepAliveItem = IoAllocateWorkItem(g_Nh.Device);
        if (g_Nh.HostItem == NULL || g_Nh.KeepAliveItem == NULL) status = STATUS_INSUFFICIENT_RESOURCES;
    }
    if (!NT_SUCCESS(status)) {
        NhLog("nvmeof-host: DriverEntry failed: 0x%08X (%s)\n", status, NhStatusText(status));
        NhTearDown();
        return status;
    }
    DriverObject->DriverUnload = NhUnload;
    ExAcquireRundownProtection(&g_Nh.Rundown);
    IoQueueWorkItem(g_Nh.HostItem, NhHostWorker, DelayedWorkQueue, NULL);
    NhLog("nvmeof-host: loaded: target port %u, subsystem %s, %u I/O queues of depth %u, interface %u\n", g_Nh.Port,
          g_Nh.SubsystemNqn, g_Nh.IoQueues, g_Nh.QueueDepth, g_Nh.IfIndex);
    return STATUS_SUCCESS;
}
