/* A driver whose DriverEntry waits for an event nobody sets (issue 19 §3): softndk-kmhost must still end on
 * SIGTERM or SIGINT, saying where the driver is, and it leaves a pool block so that the report names it. */
#include <ntddk.h>

static KEVENT g_never;

NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath) {
    (void)DriverObject;
    (void)RegistryPath;
    void* held = ExAllocatePool2(POOL_FLAG_NON_PAGED, 64, 'kcuS');
    (void)held;
    KeInitializeEvent(&g_never, NotificationEvent, FALSE);
    DbgPrint("stuck_driver: waiting for an event nobody sets\n");
    KeWaitForSingleObject(&g_never, Executive, KernelMode, FALSE, NULL);
    return STATUS_SUCCESS;
}
