/* Issue 19 §1 ("Builds unchanged"): the names an independent kernel NDK consumer (Microsoft's public NDK kernel
 * sample style) stopped at, used the way such a driver uses them, compiled as strict C11 and run. */
#include <ntddk.h>
#include <wdmsec.h>
#include <ifdef.h>
#include <netioapi.h>
#include <ip2string.h>
#include <wsk.h>
#include <wskndk.h>
#include <softndk_km.h> /* the host side: registers the interface a real system would have */

#define NDKT_TAG 'tkdN'

typedef struct _NDKT_CONTEXT {
    LIST_ENTRY Requests;
    KSPIN_LOCK Lock;
    IF_INDEX IfIndex;
    WCHAR Alias[NDIS_IF_MAX_STRING_SIZE + 1];
} NDKT_CONTEXT, *PNDKT_CONTEXT;

__pragma(warning(push)) __pragma(warning(disable : 4201)) static NDKT_CONTEXT g_context;
__pragma(warning(pop))

    _IRQL_requires_max_(PASSIVE_LEVEL) _Must_inspect_result_ _Success_(return == STATUS_SUCCESS) static NTSTATUS
    NdktAllocate(_In_ SIZE_T Size, _Deref_out_ PVOID* Buffer) {
    *Buffer = ExAllocatePool2(POOL_FLAG_NON_PAGED, Size, NDKT_TAG);
    return *Buffer != NULL ? STATUS_SUCCESS : STATUS_INSUFFICIENT_RESOURCES;
}

static DRIVER_DISPATCH NdktDeviceControl;
_Use_decl_annotations_ static NTSTATUS NdktDeviceControl(PDEVICE_OBJECT DeviceObject, PIRP Irp) {
    UNREFERENCED_PARAMETER(DeviceObject);
    PIO_STACK_LOCATION stack = IoGetCurrentIrpStackLocation(Irp);
    NTSTATUS status = stack->MajorFunction == IRP_MJ_DEVICE_CONTROL ? STATUS_SUCCESS : STATUS_INVALID_DEVICE_REQUEST;
    Irp->IoStatus.Status = status;
    Irp->IoStatus.Information = stack->Parameters.DeviceIoControl.OutputBufferLength;
    IoCompleteRequest(Irp, IO_NO_INCREMENT);
    return status;
}

_Function_class_(DRIVER_DISPATCH) _Dispatch_type_(IRP_MJ_CREATE) _Dispatch_type_(IRP_MJ_CLOSE) static NTSTATUS
    NdktCreateClose(_In_ PDEVICE_OBJECT DeviceObject, _Inout_ PIRP Irp) {
    UNREFERENCED_PARAMETER(DeviceObject);
    Irp->IoStatus.Status = STATUS_SUCCESS;
    Irp->IoStatus.Information = 0;
    IoCompleteRequest(Irp, IO_NO_INCREMENT);
    return STATUS_SUCCESS;
}

int main(void) {
    _No_competing_thread_begin_ InitializeListHead(&g_context.Requests);
    KeInitializeSpinLock(&g_context.Lock);
    _No_competing_thread_end_

        IN_ADDR address;
    USHORT port = 0;
    if (!NT_SUCCESS(RtlIpv4StringToAddressExW(L"127.0.0.1:44500", TRUE, &address, &port))) return 1;
    if (port != RtlUshortByteSwap(44500)) return 2;

    NET_LUID luid;
    if (!NT_SUCCESS(SoftNdkKmRegisterInterface(1, NULL))) return 3;
    g_context.IfIndex = 1;
    if (!NT_SUCCESS(ConvertInterfaceIndexToLuid(g_context.IfIndex, &luid))) return 4;
    if (!NT_SUCCESS(ConvertInterfaceLuidToAlias(&luid, g_context.Alias, RTL_NUMBER_OF(g_context.Alias)))) return 5;

    DRIVER_OBJECT driver;
    RtlZeroMemory(&driver, sizeof(driver));
    driver.MajorFunction[IRP_MJ_CREATE] = NdktCreateClose;
    driver.MajorFunction[IRP_MJ_CLOSE] = NdktCreateClose;
    driver.MajorFunction[IRP_MJ_DEVICE_CONTROL] = NdktDeviceControl;
    UNICODE_STRING name;
    RtlInitUnicodeString(&name, L"\\Device\\Ndkt");
    PDEVICE_OBJECT device = NULL;
    if (!NT_SUCCESS(IoCreateDeviceSecure(&driver, 0, &name, FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN, FALSE,
                                         &SDDL_DEVOBJ_SYS_ALL_ADM_ALL, NULL, &device)))
        return 6;
    PIRP irp = IoAllocateIrp(device->StackSize, FALSE);
    PIO_STACK_LOCATION next = IoGetNextIrpStackLocation(irp);
    next->MajorFunction = IRP_MJ_DEVICE_CONTROL;
    next->Parameters.DeviceIoControl.OutputBufferLength = 8;
    if (IoCallDriver(device, irp) != STATUS_SUCCESS || irp->IoStatus.Information != 8) return 7;
    IoFreeIrp(irp);

    PVOID buffer = NULL;
    if (!NT_SUCCESS(NdktAllocate(64, &buffer))) return 8;
    ExFreePoolWithTag(buffer, NDKT_TAG);
    IoDeleteDevice(device);
    SoftNdkKmUnregisterInterface(1);
    return 0;
}
