// The registry a driver reads its parameters from (issue 9 §2, driver hosting): ZwOpenKey, ZwQueryValueKey and
// ZwClose over a key store the host fills (SoftNdkKmSetRegistryValue; softndk-kmhost --parameter NAME=VALUE puts
// values under the driver's RegistryPath\Parameters). There are no hives, no security descriptors and no
// writes from the driver. Key paths compare case-insensitively, as the object manager does. Open key handles
// are counted; one still open at the end is reported as a leak.
#include <cstddef>
#include <cstring>
#include <cwctype>
#include <map>
#include <mutex>
#include <set>
#include <new>
#include <string>
#include <vector>

#include "km_internal.h"

namespace {

struct Value {
    ULONG type = REG_NONE;
    std::vector<UCHAR> data;
};

// A key path, case folded: "\registry\machine\system\…".
std::wstring Fold(const wchar_t* text, size_t length) {
    std::wstring folded(text, length);
    for (wchar_t& c : folded) c = static_cast<wchar_t>(std::towlower(static_cast<wint_t>(c)));
    while (!folded.empty() && folded.back() == L'\\') folded.pop_back();
    return folded;
}

struct OpenKey {
    std::wstring path;
};

struct Registry {
    std::mutex mutex;
    std::map<std::wstring, std::map<std::wstring, Value>> keys;  // folded key path → folded value name → value
    std::set<OpenKey*> open;
};

Registry& TheRegistry() {
    static Registry* registry = new Registry;  // never destroyed: drivers may close keys during exit
    return *registry;
}

bool IsKeyHandle(Registry& registry, HANDLE handle) {
    return registry.open.count(static_cast<OpenKey*>(handle)) != 0;
}

}  // namespace

namespace softndk::km {
ULONG OpenRegistryKeys() {
    Registry& registry = TheRegistry();
    std::lock_guard lock(registry.mutex);
    return static_cast<ULONG>(registry.open.size());
}
}  // namespace softndk::km

extern "C" {

NTSTATUS SoftNdkKmSetRegistryValue(PCWSTR KeyPath, PCWSTR ValueName, ULONG Type, const VOID* Data, ULONG DataLength) {
    if (KeyPath == nullptr || ValueName == nullptr || (Data == nullptr && DataLength != 0)) {
        return STATUS_INVALID_PARAMETER;
    }
    Registry& registry = TheRegistry();
    std::lock_guard lock(registry.mutex);
    Value& value = registry.keys[Fold(KeyPath, std::wcslen(KeyPath))][Fold(ValueName, std::wcslen(ValueName))];
    value.type = Type;
    const auto* bytes = static_cast<const UCHAR*>(Data);
    value.data.assign(bytes, bytes + DataLength);
    return STATUS_SUCCESS;
}

NTSTATUS ZwOpenKey(PHANDLE KeyHandle, ACCESS_MASK DesiredAccess, POBJECT_ATTRIBUTES ObjectAttributes) {
    softndk::km::RequireIrqlAtMost(PASSIVE_LEVEL, "ZwOpenKey");
    if (KeyHandle == nullptr || ObjectAttributes == nullptr || ObjectAttributes->ObjectName == nullptr ||
        ObjectAttributes->ObjectName->Buffer == nullptr) {
        return STATUS_INVALID_PARAMETER;
    }
    if ((DesiredAccess & ~static_cast<ACCESS_MASK>(KEY_READ)) != 0) return STATUS_ACCESS_DENIED;  // read only
    const UNICODE_STRING& name = *ObjectAttributes->ObjectName;
    std::wstring path = Fold(name.Buffer, name.Length / sizeof(WCHAR));
    Registry& registry = TheRegistry();
    std::lock_guard lock(registry.mutex);
    if (ObjectAttributes->RootDirectory != nullptr) {  // relative to an open key
        if (!IsKeyHandle(registry, ObjectAttributes->RootDirectory)) return STATUS_INVALID_HANDLE;
        path = static_cast<OpenKey*>(ObjectAttributes->RootDirectory)->path + L"\\" + path;
    } else if (path.empty() || path[0] != L'\\') {
        return STATUS_OBJECT_PATH_NOT_FOUND;  // an absolute name starts at the root
    }
    // A key exists when it holds values or a key below it does.
    const auto found = registry.keys.lower_bound(path);
    const bool exists = found != registry.keys.end() &&
                        (found->first == path || found->first.compare(0, path.size() + 1, path + L"\\") == 0);
    if (!exists) return STATUS_OBJECT_NAME_NOT_FOUND;
    auto* key = new (std::nothrow) OpenKey{path};
    if (key == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
    registry.open.insert(key);
    *KeyHandle = key;
    return STATUS_SUCCESS;
}

NTSTATUS ZwQueryValueKey(HANDLE KeyHandle, PUNICODE_STRING ValueName,
                         KEY_VALUE_INFORMATION_CLASS KeyValueInformationClass, PVOID KeyValueInformation, ULONG Length,
                         PULONG ResultLength) {
    softndk::km::RequireIrqlAtMost(PASSIVE_LEVEL, "ZwQueryValueKey");
    if (ValueName == nullptr || ResultLength == nullptr || (KeyValueInformation == nullptr && Length != 0))
        return STATUS_INVALID_PARAMETER;
    if (KeyValueInformationClass != KeyValuePartialInformation) {
        return STATUS_NOT_SUPPORTED;  // Basic and Full information are not emulated (docs/kernel-consumers.md)
    }
    Registry& registry = TheRegistry();
    std::lock_guard lock(registry.mutex);
    if (!IsKeyHandle(registry, KeyHandle)) return STATUS_INVALID_HANDLE;
    const auto key = registry.keys.find(static_cast<OpenKey*>(KeyHandle)->path);
    const std::wstring name =
        ValueName->Buffer != nullptr ? Fold(ValueName->Buffer, ValueName->Length / sizeof(WCHAR)) : L"";
    if (key == registry.keys.end() || key->second.count(name) == 0) return STATUS_OBJECT_NAME_NOT_FOUND;
    const Value& value = key->second.at(name);
    const ULONG header = static_cast<ULONG>(offsetof(KEY_VALUE_PARTIAL_INFORMATION, Data));
    const ULONG needed = header + static_cast<ULONG>(value.data.size());
    *ResultLength = needed;
    if (Length < header) return STATUS_BUFFER_TOO_SMALL;
    auto* out = static_cast<KEY_VALUE_PARTIAL_INFORMATION*>(KeyValueInformation);
    out->TitleIndex = 0;
    out->Type = value.type;
    out->DataLength = static_cast<ULONG>(value.data.size());
    if (Length < needed) return STATUS_BUFFER_OVERFLOW;  // the header is filled, as Windows does
    if (!value.data.empty()) std::memcpy(out->Data, value.data.data(), value.data.size());
    return STATUS_SUCCESS;
}

NTSTATUS ZwClose(HANDLE Handle) {
    softndk::km::RequireIrqlAtMost(PASSIVE_LEVEL, "ZwClose");
    Registry& registry = TheRegistry();
    std::unique_lock lock(registry.mutex);
    if (!IsKeyHandle(registry, Handle)) return STATUS_INVALID_HANDLE;  // the only handles there are
    registry.open.erase(static_cast<OpenKey*>(Handle));
    lock.unlock();
    delete static_cast<OpenKey*>(Handle);
    return STATUS_SUCCESS;
}

}  // extern "C"
