// IRPs (IoAllocateIrp, IoCallDriver, IoCompleteRequest, IoFreeIrp) and IoCreateDeviceSecure with the wdmsec.h
// SDDL strings, IoCreateSymbolicLink/IoDeleteSymbolicLink (issue 19 §1). IoCreateDevice itself lives with the device
// objects in runtime.cpp.
#include <cstring>
#include <cwchar>
#include <cwctype>
#include <map>
#include <string>

#include <softndk/km/wdmsec.h>

#include "km/km_internal.h"

using namespace softndk::km;

namespace {

constexpr ULONG kIrpTag = 'prIN';
constexpr CCHAR kMaxStackSize = 32;
constexpr ULONG kMultipleIrpCompleteRequests = 0x44;

// The IRPs IoAllocateIrp made: true once completed (a second IoCompleteRequest is bug check 0x44).
std::mutex g_irps_mutex;
std::map<PIRP, bool>& Irps() {
    static auto* irps = new std::map<PIRP, bool>();
    return *irps;
}

void InitializeIrp(PIRP irp, USHORT size, CCHAR stack_size, UCHAR allocation_flags) {
    std::memset(irp, 0, size);
    irp->Type = IO_TYPE_IRP;
    irp->Size = size;
    irp->StackCount = stack_size;
    irp->CurrentLocation = static_cast<CHAR>(stack_size + 1);
    irp->AllocationFlags = allocation_flags;
    irp->ApcEnvironment = 0;
    InitializeListHead(&irp->ThreadListEntry);
    irp->Tail.Overlay.CurrentStackLocation = reinterpret_cast<PIO_STACK_LOCATION>(irp + 1) + stack_size;
}

// A Verifier report for an IRP that IoAllocateIrp did not make (there is no IoInitializeIrp): true when foreign.
bool Foreign(PIRP irp, const char* call) {
    {
        std::lock_guard lock(g_irps_mutex);
        if (Irps().count(irp) != 0) return false;
    }
    Report("DRIVER_VERIFIER_IOMANAGER_VIOLATION", kDriverVerifierIoManagerViolation, call,
           "IRP %p was not allocated by IoAllocateIrp (or was freed already)", static_cast<void*>(irp));
    return true;
}

// SDDL of a device object (wdmsec.h): "D:P" then ACEs "(type;flags;rights;object;inherit;sid)".
bool ValidDeviceSddl(PCUNICODE_STRING sddl) {
    if (sddl == nullptr || sddl->Buffer == nullptr || sddl->Length % sizeof(WCHAR) != 0) return false;
    const std::wstring text(sddl->Buffer, sddl->Length / sizeof(WCHAR));
    if (text.rfind(L"D:P", 0) != 0) return false;
    size_t at = 3;
    while (at < text.size()) {
        if (text[at] != L'(') return false;
        const size_t close = text.find(L')', at);
        if (close == std::wstring::npos) return false;
        const std::wstring ace = text.substr(at + 1, close - at - 1);
        std::wstring fields[6];
        size_t count = 0, start = 0;
        while (true) {
            const size_t semicolon = ace.find(L';', start);
            if (count == 6) return false;
            fields[count++] =
                ace.substr(start, semicolon == std::wstring::npos ? std::wstring::npos : semicolon - start);
            if (semicolon == std::wstring::npos) break;
            start = semicolon + 1;
        }
        if (count != 6 || (fields[0] != L"A" && fields[0] != L"D") || fields[2].empty() || fields[5].empty())
            return false;
        at = close + 1;
    }
    return true;
}

// Symbolic links (IoCreateSymbolicLink): link name, compared case-insensitively, to device name.
std::mutex g_links_mutex;
std::map<std::wstring, std::wstring>& Links() {
    static auto* links = new std::map<std::wstring, std::wstring>();
    return *links;
}
bool LinkName(PUNICODE_STRING name, std::wstring* key) {
    if (name == nullptr || name->Buffer == nullptr || name->Length == 0 || name->Length % sizeof(WCHAR) != 0)
        return false;
    key->assign(name->Buffer, name->Length / sizeof(WCHAR));
    for (auto& c : *key) c = static_cast<wchar_t>(std::towlower(static_cast<wint_t>(c)));
    return true;
}

}  // namespace

namespace softndk::km {
ULONG SymbolicLinks() {
    std::lock_guard lock(g_links_mutex);
    return static_cast<ULONG>(Links().size());
}
}  // namespace softndk::km

extern "C" {

#define SOFTNDK_SDDL(name, text) \
    const UNICODE_STRING name = {sizeof(text) - sizeof(WCHAR), sizeof(text), const_cast<PWCH>(text)}
SOFTNDK_SDDL(SDDL_DEVOBJ_KERNEL_ONLY, L"D:P");
SOFTNDK_SDDL(SDDL_DEVOBJ_SYS_ALL, L"D:P(A;;GA;;;SY)");
SOFTNDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_ALL, L"D:P(A;;GA;;;SY)(A;;GA;;;BA)");
SOFTNDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RX, L"D:P(A;;GA;;;SY)(A;;GRGX;;;BA)");
SOFTNDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_R, L"D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GR;;;WD)");
SOFTNDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_R_RES_R, L"D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GR;;;WD)(A;;GR;;;RC)");
SOFTNDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RW_RES_R, L"D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GRGW;;;WD)(A;;GR;;;RC)");
SOFTNDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RWX_RES_RWX,
             L"D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GRGWGX;;;WD)(A;;GRGWGX;;;RC)");
SOFTNDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_ALL_WORLD_ALL_RES_ALL, L"D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GA;;;WD)(A;;GA;;;RC)");
#undef SOFTNDK_SDDL

NTSTATUS IoCreateDeviceSecure(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize, PUNICODE_STRING DeviceName,
                              DEVICE_TYPE DeviceType, ULONG DeviceCharacteristics, BOOLEAN Exclusive,
                              PCUNICODE_STRING DefaultSDDLString, LPCGUID, PDEVICE_OBJECT* DeviceObject) {
    RequireIrqlAtMost(PASSIVE_LEVEL, "IoCreateDeviceSecure");
    if (!ValidDeviceSddl(DefaultSDDLString)) return STATUS_INVALID_PARAMETER;
    return IoCreateDevice(DriverObject, DeviceExtensionSize, DeviceName, DeviceType, DeviceCharacteristics, Exclusive,
                          DeviceObject);
}

// Issue 19 §1: a name table, so a driver's link/unlink pairs behave as on Windows; nothing opens the names.
NTSTATUS IoCreateSymbolicLink(PUNICODE_STRING SymbolicLinkName, PUNICODE_STRING DeviceName) {
    RequireIrqlAtMost(PASSIVE_LEVEL, "IoCreateSymbolicLink");
    std::wstring key, target;
    if (!LinkName(SymbolicLinkName, &key) || !LinkName(DeviceName, &target)) return STATUS_INVALID_PARAMETER;
    std::lock_guard lock(g_links_mutex);
    return Links().emplace(key, target).second ? STATUS_SUCCESS : STATUS_OBJECT_NAME_COLLISION;
}

NTSTATUS IoDeleteSymbolicLink(PUNICODE_STRING SymbolicLinkName) {
    RequireIrqlAtMost(PASSIVE_LEVEL, "IoDeleteSymbolicLink");
    std::wstring key;
    if (!LinkName(SymbolicLinkName, &key)) return STATUS_INVALID_PARAMETER;
    std::lock_guard lock(g_links_mutex);
    return Links().erase(key) != 0 ? STATUS_SUCCESS : STATUS_OBJECT_NAME_NOT_FOUND;
}

PIRP IoAllocateIrp(CCHAR StackSize, BOOLEAN) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "IoAllocateIrp");
    if (StackSize < 1 || StackSize > kMaxStackSize) return nullptr;
    const USHORT size = IoSizeOfIrp(StackSize);
    auto* irp = static_cast<PIRP>(SoftNdkKmAllocatePool2(POOL_FLAG_NON_PAGED, size, kIrpTag));
    if (irp == nullptr) return nullptr;
    InitializeIrp(irp, size, StackSize, 0);
    std::lock_guard lock(g_irps_mutex);
    Irps()[irp] = false;
    return irp;
}

VOID IoReuseIrp(PIRP Irp, NTSTATUS Iostatus) {
    if (Irp == nullptr || Foreign(Irp, "IoReuseIrp")) return;
    InitializeIrp(Irp, Irp->Size, Irp->StackCount, Irp->AllocationFlags);
    Irp->IoStatus.Status = Iostatus;
    std::lock_guard lock(g_irps_mutex);
    auto found = Irps().find(Irp);
    if (found != Irps().end()) found->second = false;
}

VOID IoFreeIrp(PIRP Irp) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "IoFreeIrp");
    if (Irp == nullptr) return;
    {
        std::lock_guard lock(g_irps_mutex);
        if (Irps().erase(Irp) == 0) {
            Report("BAD_POOL_CALLER", kBadPoolCaller, "IoFreeIrp", "IRP %p was not allocated by IoAllocateIrp",
                   static_cast<void*>(Irp));
            return;
        }
    }
    if (Irp->CurrentLocation <= Irp->StackCount)
        Report("DRIVER_VERIFIER_IOMANAGER_VIOLATION", kDriverVerifierIoManagerViolation, "IoFreeIrp",
               "IRP %p is freed while a driver still holds it (stack location %d of %d)", static_cast<void*>(Irp),
               Irp->CurrentLocation, Irp->StackCount);
    SoftNdkKmFreePool(Irp);
}

NTSTATUS IofCallDriver(PDEVICE_OBJECT DeviceObject, PIRP Irp) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "IoCallDriver");
    if (DeviceObject == nullptr || Irp == nullptr || DeviceObject->DriverObject == nullptr)
        return STATUS_INVALID_PARAMETER;
    if (Foreign(Irp, "IoCallDriver")) return STATUS_INVALID_PARAMETER;
    if (Irp->CurrentLocation <= 1) {
        Report("NO_MORE_IRP_STACK_LOCATIONS", 0x35, "IoCallDriver", "IRP %p has no stack location left for %p",
               static_cast<void*>(Irp), static_cast<void*>(DeviceObject));
        return STATUS_INVALID_PARAMETER;
    }
    {
        std::lock_guard lock(g_irps_mutex);
        auto found = Irps().find(Irp);
        if (found != Irps().end()) found->second = false;  // a new request
    }
    IoSetNextIrpStackLocation(Irp);
    PIO_STACK_LOCATION stack = IoGetCurrentIrpStackLocation(Irp);
    stack->DeviceObject = DeviceObject;
    PDRIVER_DISPATCH dispatch = stack->MajorFunction <= IRP_MJ_MAXIMUM_FUNCTION
                                    ? DeviceObject->DriverObject->MajorFunction[stack->MajorFunction]
                                    : nullptr;
    if (dispatch != nullptr) return dispatch(DeviceObject, Irp);
    // The I/O manager's default for an entry the driver left empty.
    Irp->IoStatus.Status = STATUS_INVALID_DEVICE_REQUEST;
    Irp->IoStatus.Information = 0;
    IofCompleteRequest(Irp, IO_NO_INCREMENT);
    return STATUS_INVALID_DEVICE_REQUEST;
}

VOID IofCompleteRequest(PIRP Irp, CCHAR) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "IoCompleteRequest");
    if (Irp == nullptr || Foreign(Irp, "IoCompleteRequest")) return;
    if (Irp->IoStatus.Status == STATUS_PENDING) {  // refused, and not counted as a completion
        Report("DRIVER_VERIFIER_IOMANAGER_VIOLATION", kDriverVerifierIoManagerViolation, "IoCompleteRequest",
               "IRP %p is completed with STATUS_PENDING", static_cast<void*>(Irp));
        return;
    }
    bool twice = false;
    {
        std::lock_guard lock(g_irps_mutex);
        bool& completed = Irps()[Irp];
        twice = completed;
        completed = true;
    }
    if (twice) {
        Report("MULTIPLE_IRP_COMPLETE_REQUESTS", kMultipleIrpCompleteRequests, "IoCompleteRequest",
               "IRP %p is completed a second time", static_cast<void*>(Irp));
        return;
    }
    // From the current stack location up, as the I/O manager does.
    while (Irp->CurrentLocation <= Irp->StackCount) {
        PIO_STACK_LOCATION stack = IoGetCurrentIrpStackLocation(Irp);
        IoSkipCurrentIrpStackLocation(Irp);
        Irp->PendingReturned = (stack->Control & SL_PENDING_RETURNED) != 0;
        const NTSTATUS status = Irp->IoStatus.Status;
        const bool invoke =
            stack->CompletionRoutine != nullptr && ((NT_SUCCESS(status) && (stack->Control & SL_INVOKE_ON_SUCCESS)) ||
                                                    (!NT_SUCCESS(status) && (stack->Control & SL_INVOKE_ON_ERROR)) ||
                                                    (Irp->Cancel && (stack->Control & SL_INVOKE_ON_CANCEL)));
        PIO_COMPLETION_ROUTINE routine = stack->CompletionRoutine;
        PVOID context = stack->Context;
        std::memset(stack, 0, sizeof(*stack));
        if (invoke) {
            PDEVICE_OBJECT device =
                Irp->CurrentLocation <= Irp->StackCount ? IoGetCurrentIrpStackLocation(Irp)->DeviceObject : nullptr;
            if (routine(device, Irp, context) == STATUS_MORE_PROCESSING_REQUIRED) return;
        } else if (Irp->PendingReturned && Irp->CurrentLocation <= Irp->StackCount) {
            IoMarkIrpPending(Irp);
        }
    }
    if (Irp->UserIosb != nullptr) *Irp->UserIosb = Irp->IoStatus;
    if (Irp->UserEvent != nullptr) KeSetEvent(Irp->UserEvent, IO_NO_INCREMENT, FALSE);
}

}  // extern "C"
