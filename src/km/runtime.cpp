// Rtl strings and memory, DbgPrint, bug checks and assertions, driver and device objects, thread identity,
// and the host's statistics (issue 9 §2).
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cwchar>

#include "km/km_internal.h"

namespace softndk::km {
namespace {

std::atomic<ULONG> g_devices{0};
thread_local char t_thread_identity;
constexpr ULONG kStringTag = 'rtSN';

int DebugLevelLimit() {
    static const int limit = [] {
        const char* text = std::getenv("SOFTNDK_DBGPRINT_LEVEL");
        return text != nullptr ? std::atoi(text) : 0x7fffffff;
    }();
    return limit;
}

}  // namespace

ULONG DeviceObjects() {
    return g_devices.load();
}

}  // namespace softndk::km

using namespace softndk::km;

extern "C" {

// ---- memory ----
SIZE_T RtlCompareMemory(const VOID* Source1, const VOID* Source2, SIZE_T Length) {
    const auto* a = static_cast<const UCHAR*>(Source1);
    const auto* b = static_cast<const UCHAR*>(Source2);
    SIZE_T i = 0;
    while (i < Length && a[i] == b[i]) ++i;
    return i;
}

// ---- strings ----
VOID RtlInitUnicodeString(PUNICODE_STRING DestinationString, PCWSTR SourceString) {
    size_t bytes = SourceString != nullptr ? std::wcslen(SourceString) * sizeof(WCHAR) : 0;
    if (bytes > MAXUSHORT - sizeof(WCHAR)) bytes = (MAXUSHORT - sizeof(WCHAR)) / sizeof(WCHAR) * sizeof(WCHAR);
    DestinationString->Length = static_cast<USHORT>(bytes);
    DestinationString->MaximumLength = static_cast<USHORT>(SourceString != nullptr ? bytes + sizeof(WCHAR) : 0);
    DestinationString->Buffer = const_cast<PWCH>(SourceString);
}

VOID RtlInitAnsiString(PANSI_STRING DestinationString, PCSTR SourceString) {
    size_t bytes = SourceString != nullptr ? std::strlen(SourceString) : 0;
    if (bytes > MAXUSHORT - 1) bytes = MAXUSHORT - 1;
    DestinationString->Length = static_cast<USHORT>(bytes);
    DestinationString->MaximumLength = static_cast<USHORT>(SourceString != nullptr ? bytes + 1 : 0);
    DestinationString->Buffer = const_cast<PCHAR>(SourceString);
}
VOID RtlInitString(PSTRING DestinationString, PCSTR SourceString) {
    RtlInitAnsiString(DestinationString, SourceString);
}

VOID RtlCopyUnicodeString(PUNICODE_STRING DestinationString, PCUNICODE_STRING SourceString) {
    if (SourceString == nullptr) {
        DestinationString->Length = 0;
        return;
    }
    USHORT bytes = SourceString->Length < DestinationString->MaximumLength ? SourceString->Length
                                                                           : DestinationString->MaximumLength;
    bytes = static_cast<USHORT>(bytes / sizeof(WCHAR) * sizeof(WCHAR));
    std::memmove(DestinationString->Buffer, SourceString->Buffer, bytes);
    DestinationString->Length = bytes;
    if (bytes + sizeof(WCHAR) <= DestinationString->MaximumLength)
        DestinationString->Buffer[bytes / sizeof(WCHAR)] = L'\0';
}

NTSTATUS RtlAppendUnicodeStringToString(PUNICODE_STRING Destination, PCUNICODE_STRING Source) {
    if (Source == nullptr || Source->Length == 0) return STATUS_SUCCESS;
    if (static_cast<ULONG>(Destination->Length) + Source->Length > Destination->MaximumLength)
        return STATUS_BUFFER_TOO_SMALL;
    std::memmove(reinterpret_cast<UCHAR*>(Destination->Buffer) + Destination->Length, Source->Buffer, Source->Length);
    Destination->Length = static_cast<USHORT>(Destination->Length + Source->Length);
    if (Destination->Length + sizeof(WCHAR) <= Destination->MaximumLength)
        Destination->Buffer[Destination->Length / sizeof(WCHAR)] = L'\0';
    return STATUS_SUCCESS;
}

NTSTATUS RtlAppendUnicodeToString(PUNICODE_STRING Destination, PCWSTR Source) {
    UNICODE_STRING source;
    RtlInitUnicodeString(&source, Source);
    return RtlAppendUnicodeStringToString(Destination, &source);
}

LONG RtlCompareUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2, BOOLEAN CaseInSensitive) {
    size_t n1 = String1->Length / sizeof(WCHAR), n2 = String2->Length / sizeof(WCHAR);
    for (size_t i = 0; i < n1 && i < n2; ++i) {
        wint_t a = String1->Buffer[i], b = String2->Buffer[i];
        if (CaseInSensitive) {
            a = std::towupper(a);
            b = std::towupper(b);
        }
        if (a != b) return a < b ? -1 : 1;
    }
    return n1 == n2 ? 0 : (n1 < n2 ? -1 : 1);
}

BOOLEAN RtlEqualUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2, BOOLEAN CaseInSensitive) {
    return String1->Length == String2->Length && RtlCompareUnicodeString(String1, String2, CaseInSensitive) == 0;
}

NTSTATUS RtlUnicodeStringToAnsiString(PANSI_STRING DestinationString, PCUNICODE_STRING SourceString,
                                      BOOLEAN AllocateDestinationString) {
    const size_t count = SourceString->Length / sizeof(WCHAR);
    if (AllocateDestinationString) {
        auto* buffer = static_cast<PCHAR>(ExAllocatePoolWithTag(PagedPool, count + 1, kStringTag));
        if (buffer == nullptr) return STATUS_NO_MEMORY;
        DestinationString->Buffer = buffer;
        DestinationString->MaximumLength = static_cast<USHORT>(count + 1);
    } else if (count >= DestinationString->MaximumLength) {
        return STATUS_BUFFER_OVERFLOW;
    }
    for (size_t i = 0; i < count; ++i) {
        WCHAR c = SourceString->Buffer[i];
        DestinationString->Buffer[i] = c < 0x80 ? static_cast<CHAR>(c) : '?';
    }
    DestinationString->Buffer[count] = '\0';
    DestinationString->Length = static_cast<USHORT>(count);
    return STATUS_SUCCESS;
}

NTSTATUS RtlAnsiStringToUnicodeString(PUNICODE_STRING DestinationString, PCANSI_STRING SourceString,
                                      BOOLEAN AllocateDestinationString) {
    const size_t count = SourceString->Length;
    const size_t bytes = (count + 1) * sizeof(WCHAR);
    if (bytes > MAXUSHORT) return STATUS_INVALID_PARAMETER_MIX;
    if (AllocateDestinationString) {
        auto* buffer = static_cast<PWCH>(ExAllocatePoolWithTag(PagedPool, bytes, kStringTag));
        if (buffer == nullptr) return STATUS_NO_MEMORY;
        DestinationString->Buffer = buffer;
        DestinationString->MaximumLength = static_cast<USHORT>(bytes);
    } else if (bytes > DestinationString->MaximumLength) {
        return STATUS_BUFFER_OVERFLOW;
    }
    for (size_t i = 0; i < count; ++i)
        DestinationString->Buffer[i] = static_cast<WCHAR>(static_cast<UCHAR>(SourceString->Buffer[i]));
    DestinationString->Buffer[count] = L'\0';
    DestinationString->Length = static_cast<USHORT>(count * sizeof(WCHAR));
    return STATUS_SUCCESS;
}

VOID RtlFreeUnicodeString(PUNICODE_STRING UnicodeString) {
    if (UnicodeString->Buffer != nullptr) ExFreePoolWithTag(UnicodeString->Buffer, kStringTag);
    UnicodeString->Buffer = nullptr;
    UnicodeString->Length = UnicodeString->MaximumLength = 0;
}
VOID RtlFreeAnsiString(PANSI_STRING AnsiString) {
    if (AnsiString->Buffer != nullptr) ExFreePoolWithTag(AnsiString->Buffer, kStringTag);
    AnsiString->Buffer = nullptr;
    AnsiString->Length = AnsiString->MaximumLength = 0;
}

NTSTATUS RtlUnicodeStringToInteger(PCUNICODE_STRING String, ULONG Base, PULONG Value) {
    if (Value == nullptr || (Base != 0 && Base != 2 && Base != 8 && Base != 10 && Base != 16))
        return STATUS_INVALID_PARAMETER;
    size_t n = String->Length / sizeof(WCHAR), i = 0;
    while (i < n && String->Buffer[i] == L' ') ++i;
    bool negative = false;
    if (i < n && (String->Buffer[i] == L'-' || String->Buffer[i] == L'+')) negative = String->Buffer[i++] == L'-';
    if (Base == 0) {
        Base = 10;
        if (i + 1 < n && String->Buffer[i] == L'0') {
            WCHAR p = String->Buffer[i + 1];
            if (p == L'x') Base = 16;
            if (p == L'o') Base = 8;
            if (p == L'b') Base = 2;
            if (Base != 10) i += 2;
        }
    }
    ULONG result = 0;
    for (; i < n; ++i) {
        WCHAR c = String->Buffer[i];
        ULONG digit = c >= L'0' && c <= L'9'
                          ? c - L'0'
                          : (c >= L'a' && c <= L'f' ? c - L'a' + 10 : (c >= L'A' && c <= L'F' ? c - L'A' + 10 : 99));
        if (digit >= Base) break;
        result = result * Base + digit;
    }
    *Value = negative ? static_cast<ULONG>(-static_cast<LONG>(result)) : result;
    return STATUS_SUCCESS;
}

// ---- debug output ----
ULONG vDbgPrintEx(ULONG, ULONG Level, PCCH Format, va_list Arguments) {
    ULONG level = Level & ~DPFLTR_MASK;
    if (!(Level & DPFLTR_MASK) && static_cast<int>(level) > DebugLevelLimit()) return STATUS_SUCCESS;
    char line[1024];
    std::vsnprintf(line, sizeof(line), Format, Arguments);
    std::fputs(line, stderr);
    return STATUS_SUCCESS;
}
ULONG DbgPrintEx(ULONG ComponentId, ULONG Level, PCSTR Format, ...) {
    va_list args;
    va_start(args, Format);
    ULONG result = vDbgPrintEx(ComponentId, Level, Format, args);
    va_end(args);
    return result;
}
ULONG DbgPrint(PCSTR Format, ...) {
    va_list args;
    va_start(args, Format);
    ULONG result = vDbgPrintEx(DPFLTR_DEFAULT_ID, DPFLTR_ERROR_LEVEL, Format, args);
    va_end(args);
    return result;
}

// ---- bug checks, assertions, corrupt lists ----
VOID KeBugCheckEx(ULONG BugCheckCode, ULONG_PTR P1, ULONG_PTR P2, ULONG_PTR P3, ULONG_PTR P4) {
    std::fprintf(stderr, "\n*** SOFTNDK BUGCHECK 0x%08X (0x%lx, 0x%lx, 0x%lx, 0x%lx) at %s\n", BugCheckCode,
                 static_cast<unsigned long>(P1), static_cast<unsigned long>(P2), static_cast<unsigned long>(P3),
                 static_cast<unsigned long>(P4), IrqlName(CurrentIrql()));
    std::fflush(stderr);
    std::abort();
}
VOID KeBugCheck(ULONG BugCheckCode) {
    KeBugCheckEx(BugCheckCode, 0, 0, 0, 0);
}

VOID SoftNdkKmAssertionFailed(const char* Expression, const char* File, int Line) {
    Report("NT_ASSERT", kKmodeExceptionNotHandled, "NT_ASSERT", "assertion failed: %s (%s:%d)", Expression, File, Line);
}

VOID SoftNdkKmPagedCode(const char* Function) {
    if (CurrentIrql() > APC_LEVEL)
        Report("IRQL_NOT_LESS_OR_EQUAL", kIrqlNotLessOrEqual, Function, "PAGED_CODE() in %s: pageable code runs at %s",
               Function, IrqlName(CurrentIrql()));
}

VOID SoftNdkKmListCorrupt(PLIST_ENTRY Entry) {
    std::fprintf(stderr,
                 "\n*** SOFTNDK VERIFIER: KERNEL_SECURITY_CHECK_FAILURE (bug check 0x139, corrupt LIST_ENTRY %p)\n",
                 static_cast<void*>(Entry));
    std::abort();
}

// ---- driver and device objects ----
NTSTATUS IoCreateDevice(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize, PUNICODE_STRING, ULONG DeviceType,
                        ULONG DeviceCharacteristics, BOOLEAN, PDEVICE_OBJECT* DeviceObject) {
    RequireIrqlAtMost(PASSIVE_LEVEL, "IoCreateDevice");
    if (DriverObject == nullptr || DeviceObject == nullptr) return STATUS_INVALID_PARAMETER;
    const SIZE_T extension_offset = ALIGN_UP_BY(sizeof(DEVICE_OBJECT), 16);
    auto* device = static_cast<PDEVICE_OBJECT>(
        SoftNdkKmAllocatePool2(POOL_FLAG_NON_PAGED, extension_offset + DeviceExtensionSize + 1, 'veDI'));
    if (device == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
    device->Type = 3;
    device->Size = static_cast<USHORT>(sizeof(DEVICE_OBJECT) + DeviceExtensionSize);
    device->DriverObject = DriverObject;
    device->DeviceType = DeviceType;
    device->Characteristics = DeviceCharacteristics;
    device->Flags = DO_DEVICE_INITIALIZING;
    device->StackSize = 1;
    device->DeviceExtension = DeviceExtensionSize != 0 ? reinterpret_cast<UCHAR*>(device) + extension_offset : nullptr;
    device->NextDevice = DriverObject->DeviceObject;
    DriverObject->DeviceObject = device;
    g_devices.fetch_add(1);
    *DeviceObject = device;
    return STATUS_SUCCESS;
}

VOID IoDeleteDevice(PDEVICE_OBJECT DeviceObject) {
    RequireIrqlAtMost(PASSIVE_LEVEL, "IoDeleteDevice");
    if (DeviceObject == nullptr) return;
    if (InterlockedCompareExchange(&DeviceObject->ReferenceCount, 0, 0) != 0)
        Report("DRIVER_VERIFIER_IOMANAGER_VIOLATION", kDriverVerifierIoManagerViolation, "IoDeleteDevice",
               "device object %p is deleted while %d work item(s) hold it", static_cast<void*>(DeviceObject),
               DeviceObject->ReferenceCount);
    PDEVICE_OBJECT* link = &DeviceObject->DriverObject->DeviceObject;
    while (*link != nullptr && *link != DeviceObject) link = &(*link)->NextDevice;
    if (*link == DeviceObject) *link = DeviceObject->NextDevice;
    g_devices.fetch_sub(1);
    SoftNdkKmFreePool(DeviceObject);
}

// ---- thread identity ----
PKTHREAD KeGetCurrentThread(void) {
    return reinterpret_cast<PKTHREAD>(&t_thread_identity);
}
HANDLE PsGetCurrentThreadId(void) {
    return reinterpret_cast<HANDLE>(static_cast<ULONG_PTR>(gettid()));
}
HANDLE PsGetCurrentProcessId(void) {
    return reinterpret_cast<HANDLE>(static_cast<ULONG_PTR>(getpid()));
}

// ---- host statistics ----
VOID SoftNdkKmGetStatistics(SOFTNDK_KM_STATISTICS* Statistics) {
    *Statistics = SOFTNDK_KM_STATISTICS{};
    PoolStatistics(&Statistics->PoolAllocations, &Statistics->PoolBytes);
    Statistics->NdkObjects = LiveNdkObjects();
    Statistics->NdkAdapters = OpenAdapters();
    Statistics->WskRegistrations = WskRegistrations();
    Statistics->WorkItemsQueued = WorkItemsOutstanding();
    Statistics->TimersArmed = TimersArmed();
    Statistics->DpcsQueued = DpcsOutstanding();
    Statistics->DeviceObjects = DeviceObjects();
    Statistics->RegistryKeysOpen = OpenRegistryKeys();
    Statistics->SymbolicLinks = SymbolicLinks();
}

ULONG SoftNdkKmReportLeaks(void) {
    SOFTNDK_KM_STATISTICS s;
    SoftNdkKmGetStatistics(&s);
    ULONG leaks = ReportPoolLeaks();
    struct {
        ULONG count;
        const char* what;
    } const others[] = {
        {s.NdkObjects, "NDK object(s) not closed"},
        {s.NdkAdapters, "NDK adapter(s) not closed (WskCloseNdkAdapter)"},
        {s.WskRegistrations, "WSK registration(s) not deregistered"},
        {s.WorkItemsQueued, "work item(s) still queued or running"},
        {s.TimersArmed, "timer(s) still armed"},
        {s.DpcsQueued, "DPC(s) still queued or running"},
        {s.DeviceObjects, "device object(s) not deleted"},
        {s.RegistryKeysOpen, "registry key handle(s) not closed (ZwClose)"},
        {s.SymbolicLinks, "symbolic link(s) not deleted (IoDeleteSymbolicLink)"},
    };
    for (const auto& other : others) {
        if (other.count == 0) continue;
        std::fprintf(stderr, "softndk-km: LEAK %u %s\n", other.count, other.what);
        leaks += other.count;
    }
    return leaks;
}

BOOLEAN SoftNdkKmIsIdle(void) {
    return WorkItemsOutstanding() == 0 && TimersArmed() == 0 && DpcsOutstanding() == 0 ? TRUE : FALSE;
}

VOID SoftNdkKmShutdown(void) {
    ShutdownWorkers();
    ShutdownTimersAndDpcs();
    ReleaseQuarantine();
}

}  // extern "C"
