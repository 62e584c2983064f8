// WSK registration, the provider NPI and the NDK extension (WskOpenNdkAdapter / WskCloseNdkAdapter), the
// registry of NDK interfaces (IfIndex -> SOFTNDK_ADAPTER_CONFIG, from a call or the environment) and the
// netioapi.h address table (issue 9 §2). Sockets are not implemented and say so.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>
#include <cstring>
#include <cwchar>

#include <softndk/km/wskndk.h>

#include "km/km_internal.h"

namespace softndk::km {
namespace {

constexpr ULONGLONG kRegistrationMagic = 0x57534B5245474953ULL;  // "WSKREGIS"

struct Registration {
    WSK_CLIENT_NPI client;
    uint32_t captures = 0;
};

// Issue 19 §2: one device per interface, as a NIC is one. Every WskOpenNdkAdapter of an IfIndex is a handle on
// the same NDK_ADAPTER, so objects created through one open work with objects created through another; the
// device closes with its last open (which waits for every object, LIFE-15), an earlier close returns at once.
// The adapter and every object header carry the negotiated version (AI-08), so a 1.x open and a 2.x open of one
// interface are two devices: each consumer reads the major it asked for (spec decision "NDK 2.x").
struct DeviceKey {
    NET_IFINDEX index;
    USHORT major;
    bool operator<(const DeviceKey& other) const {
        return index != other.index ? index < other.index : major < other.major;
    }
};
struct Device {
    NDK_ADAPTER* adapter = nullptr;
    std::multiset<Registration*> opens;  // one entry per open, by the WSK client that made it
};

struct State {
    std::mutex mutex;
    std::mutex open_close;  // orders the opens and closes of devices (SoftNdkOpenAdapter runs outside `mutex`)
    std::condition_variable released;
    std::map<NET_IFINDEX, SOFTNDK_ADAPTER_CONFIG> interfaces;
    std::set<Registration*> registrations;
    std::map<DeviceKey, Device> devices;
    std::map<NDK_ADAPTER*, DeviceKey> adapters;  // a device's adapter -> its interface and major
};
State& Wsk() {
    static auto* state = new State();
    return *state;
}

Registration* FromClient(PWSK_CLIENT client) {
    auto* registration = static_cast<Registration*>(client);
    State& state = Wsk();
    std::lock_guard lock(state.mutex);
    return state.registrations.count(registration) != 0 ? registration : nullptr;
}

// The versions SoftNdkOpenAdapter negotiates (AI-08): 1.0 … 1.2 and 2.0 … 2.1.
bool Negotiable(NDK_VERSION version) {
    return (version.Major == NDK_VERSION_MAJOR && version.Minor <= NDK_VERSION_1_2_MINOR) ||
           (version.Major == NDK_VERSION_2_MAJOR && version.Minor <= NDK_VERSION_2_1_MINOR);
}

bool PassiveOnly(const char* call) {
    if (CurrentIrql() == PASSIVE_LEVEL) return true;
    Report("NDK_PASSIVE_LEVEL_ONLY", kIrqlNotLessOrEqual, call, "%s may only be called at PASSIVE_LEVEL, not %s", call,
           IrqlName(CurrentIrql()));
    return false;
}

// ---- the identity of an interface (netioapi.h, one place): its LUID and its alias, both from its IfIndex ----
NET_LUID LuidOf(NET_IFINDEX index) {
    NET_LUID luid;
    luid.Value = 0;
    luid.Info.NetLuidIndex = index;
    luid.Info.IfType = IF_TYPE_ETHERNET_CSMACD;
    return luid;
}
std::wstring AliasOf(NET_IFINDEX index) {
    return L"softndk " + std::to_wstring(index);
}
bool Registered(NET_IFINDEX index) {
    State& state = Wsk();
    std::lock_guard lock(state.mutex);
    return state.interfaces.count(index) != 0;
}
// The index of a registered interface's LUID; NET_IFINDEX_UNSPECIFIED for any other value.
NET_IFINDEX IndexOf(const NET_LUID& luid) {
    const auto index = static_cast<NET_IFINDEX>(luid.Info.NetLuidIndex);
    if (!Registered(index) || LuidOf(index).Value != luid.Value) return NET_IFINDEX_UNSPECIFIED;
    return index;
}

NTSTATUS WSKAPI OpenNdkAdapter(PWSK_CLIENT Client, NDK_VERSION NdkVersion, NET_IFINDEX IfIndex,
                               NDK_ADAPTER** ppNdkAdapter) {
    PassiveOnly("WskOpenNdkAdapter");
    Registration* registration = FromClient(Client);
    if (registration == nullptr || ppNdkAdapter == nullptr) return STATUS_INVALID_PARAMETER;
    SoftNdkKmConfigureFromEnvironment();
    SOFTNDK_ADAPTER_CONFIG config;
    State& state = Wsk();
    std::lock_guard open_close(state.open_close);
    {
        std::lock_guard lock(state.mutex);
        auto it = state.interfaces.find(IfIndex);
        if (it == state.interfaces.end()) {
            std::fprintf(stderr, "softndk-km: WskOpenNdkAdapter: no NDK interface has IfIndex %u\n", IfIndex);
            return STATUS_NOT_FOUND;
        }
        config = it->second;
        // AI-08 negotiation is the provider's (SoftNdkOpenAdapter): 1.0 … 1.2 open and report 1.2, 2.0 … 2.1
        // open and report 2.1, anything else is NDIS_STATUS_BAD_VERSION (spec decision "NDK 2.x"). The same for
        // every open, so an open that joins a device checks the version as the provider would.
        auto device = state.devices.find(DeviceKey{IfIndex, NdkVersion.Major});
        if (device != state.devices.end() && Negotiable(NdkVersion)) {
            device->second.opens.insert(registration);  // issue 19 §2: another handle on the same device
            *ppNdkAdapter = device->second.adapter;
            return STATUS_SUCCESS;
        }
    }
    config.RequestedVersion = NdkVersion;
    NDK_ADAPTER* adapter = nullptr;
    NTSTATUS status = SoftNdkOpenAdapter(&config, &adapter);
    if (!NT_SUCCESS(status)) return status;
    {
        std::lock_guard lock(state.mutex);
        const DeviceKey key{IfIndex, NdkVersion.Major};
        Device& device = state.devices[key];
        device.adapter = adapter;
        device.opens.insert(registration);
        state.adapters[adapter] = key;
    }
    *ppNdkAdapter = adapter;
    return STATUS_SUCCESS;
}

VOID WSKAPI CloseNdkAdapter(PWSK_CLIENT Client, NDK_ADAPTER* pNdkAdapter) {
    PassiveOnly("WskCloseNdkAdapter");
    bool known = false, last = false;
    State& state = Wsk();
    std::unique_lock open_close(state.open_close);
    {
        std::lock_guard lock(state.mutex);
        auto it = state.adapters.find(pNdkAdapter);
        if (it != state.adapters.end()) {
            Device& device = state.devices[it->second];
            auto open = device.opens.find(static_cast<Registration*>(Client));
            known = open != device.opens.end();
            if (known) device.opens.erase(open);
            last = known && device.opens.empty();
            if (last) {
                state.devices.erase(it->second);
                state.adapters.erase(it);
            }
        }
    }
    if (!known) {
        Report("NDK_LIFE_05_CLOSED_TWICE", kDriverVerifierDetectedViolation, "WskCloseNdkAdapter",
               "%p is not an NDK adapter this WSK client opened (closed twice?); the call is refused",
               static_cast<void*>(pNdkAdapter));
        return;
    }
    if (!last) return;    // issue 19 §2: other opens still hold the device, and the objects made through this one
    open_close.unlock();  // the device is gone from the map: a new open of the interface makes a new one
    ForgetObject(pNdkAdapter);
    SoftNdkCloseAdapter(pNdkAdapter);  // LIFE-15: blocks until every object and callback is done
}

NTSTATUS WSKAPI ControlClient(PWSK_CLIENT Client, ULONG ControlCode, SIZE_T, PVOID, SIZE_T OutputSize,
                              PVOID OutputBuffer, SIZE_T* OutputSizeReturned, PIRP Irp) {
    if (FromClient(Client) == nullptr) return STATUS_INVALID_PARAMETER;
    if (ControlCode != WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH) {
        std::fprintf(stderr, "softndk-km: WskControlClient: control code 0x%08X is not supported\n", ControlCode);
        return STATUS_NOT_SUPPORTED;
    }
    if (Irp != nullptr) return STATUS_NOT_SUPPORTED;  // there are no IRPs: the query completes inline
    static const WSK_PROVIDER_NDK_DISPATCH kNdkDispatch = {&OpenNdkAdapter, &CloseNdkAdapter};
    if (OutputBuffer == nullptr || OutputSize < sizeof(kNdkDispatch)) {
        if (OutputSizeReturned != nullptr) *OutputSizeReturned = sizeof(kNdkDispatch);
        return STATUS_BUFFER_TOO_SMALL;
    }
    std::memcpy(OutputBuffer, &kNdkDispatch, sizeof(kNdkDispatch));
    if (OutputSizeReturned != nullptr) *OutputSizeReturned = sizeof(kNdkDispatch);
    return STATUS_SUCCESS;
}

NTSTATUS WSKAPI Socket(PWSK_CLIENT, ADDRESS_FAMILY, USHORT, ULONG, ULONG, PVOID, const VOID*, PEPROCESS, PETHREAD,
                       PVOID, PIRP) {
    return STATUS_NOT_SUPPORTED;  // WSK sockets are not implemented (docs/kernel-consumers.md)
}
NTSTATUS WSKAPI SocketConnect(PWSK_CLIENT, USHORT, ULONG, PSOCKADDR, PSOCKADDR, ULONG, PVOID, const VOID*, PEPROCESS,
                              PETHREAD, PVOID, PIRP) {
    return STATUS_NOT_SUPPORTED;
}
NTSTATUS WSKAPI GetAddressInfo(PWSK_CLIENT, PUNICODE_STRING, PUNICODE_STRING, ULONG, GUID*, PVOID, PVOID*, PEPROCESS,
                               PETHREAD, PIRP) {
    return STATUS_NOT_SUPPORTED;
}
VOID WSKAPI FreeAddressInfo(PWSK_CLIENT, PVOID) {}
NTSTATUS WSKAPI GetNameInfo(PWSK_CLIENT, PSOCKADDR, ULONG, PUNICODE_STRING, PUNICODE_STRING, ULONG, PEPROCESS, PETHREAD,
                            PIRP) {
    return STATUS_NOT_SUPPORTED;
}

const WSK_PROVIDER_DISPATCH kProviderDispatch = {
    MAKE_WSK_VERSION(1, 0), 0, &Socket, &SocketConnect, &ControlClient, &GetAddressInfo, &FreeAddressInfo, &GetNameInfo,
};

Registration* FromRegistration(PWSK_REGISTRATION registration) {
    if (registration == nullptr || registration->ReservedRegistrationState != kRegistrationMagic) return nullptr;
    return FromClient(registration->ReservedRegistrationContext);
}

NTSTATUS Invalid(const char* why) {
    std::fprintf(stderr, "softndk-km: %s\n", why);
    return STATUS_INVALID_PARAMETER;
}

// "Function[:nth=N|:p=F][:async][:status=0x…][:seed=N]"
NTSTATUS ParseRule(const std::string& text, SOFTNDK_FAULT_RULE* rule, std::string* name_storage) {
    size_t colon = text.find(':');
    *name_storage = text.substr(0, colon);
    *rule = SOFTNDK_FAULT_RULE{};
    rule->Status = STATUS_INSUFFICIENT_RESOURCES;
    rule->Probability = 1.0;
    while (colon != std::string::npos) {
        size_t next = text.find(':', colon + 1);
        std::string part = text.substr(colon + 1, next == std::string::npos ? std::string::npos : next - colon - 1);
        char* end = nullptr;
        if (part.rfind("nth=", 0) == 0) {
            rule->NthCall = static_cast<ULONG>(std::strtoul(part.c_str() + 4, &end, 0));
        } else if (part.rfind("p=", 0) == 0) {
            rule->Probability = std::strtod(part.c_str() + 2, &end);
        } else if (part.rfind("status=", 0) == 0) {
            rule->Status = static_cast<NTSTATUS>(std::strtoul(part.c_str() + 7, &end, 0));
        } else if (part.rfind("seed=", 0) == 0) {
            rule->Seed = static_cast<ULONG>(std::strtoul(part.c_str() + 5, &end, 0));
        } else if (part == "async") {
            rule->Asynchronous = TRUE;
            end = nullptr;
        } else {
            return Invalid(("SOFTNDK_FAULTS: unknown option '" + part + "'").c_str());
        }
        if (end != nullptr && *end != '\0') return Invalid(("SOFTNDK_FAULTS: bad number in '" + part + "'").c_str());
        colon = next;
    }
    if (name_storage->empty()) return Invalid("SOFTNDK_FAULTS: a rule needs a function name");
    return STATUS_SUCCESS;
}

}  // namespace

ULONG WskRegistrations() {
    State& state = Wsk();
    std::lock_guard lock(state.mutex);
    return static_cast<ULONG>(state.registrations.size());
}
ULONG OpenAdapters() {  // opens, not devices: each WskOpenNdkAdapter needs its WskCloseNdkAdapter
    State& state = Wsk();
    std::lock_guard lock(state.mutex);
    size_t opens = 0;
    for (const auto& [key, device] : state.devices) opens += device.opens.size();
    return static_cast<ULONG>(opens);
}

}  // namespace softndk::km

using namespace softndk::km;

extern "C" {

NTSTATUS WskRegister(PWSK_CLIENT_NPI WskClientNpi, PWSK_REGISTRATION WskRegistration) {
    PassiveOnly("WskRegister");
    if (WskClientNpi == nullptr || WskClientNpi->Dispatch == nullptr || WskRegistration == nullptr)
        return STATUS_INVALID_PARAMETER;
    if (WSK_MAJOR_VERSION(WskClientNpi->Dispatch->Version) != 1) return STATUS_NOT_SUPPORTED;
    auto* registration = new Registration{*WskClientNpi, 0};
    {
        State& state = Wsk();
        std::lock_guard lock(state.mutex);
        state.registrations.insert(registration);
    }
    WskRegistration->ReservedRegistrationState = kRegistrationMagic;
    WskRegistration->ReservedRegistrationContext = registration;
    WskRegistration->ReservedRegistrationLock = 0;
    return STATUS_SUCCESS;
}

NTSTATUS WskCaptureProviderNPI(PWSK_REGISTRATION WskRegistration, ULONG, PWSK_PROVIDER_NPI WskProviderNpi) {
    if (WskProviderNpi == nullptr) return STATUS_INVALID_PARAMETER;
    Registration* registration = FromRegistration(WskRegistration);
    if (registration == nullptr) return STATUS_INVALID_PARAMETER;
    {
        State& state = Wsk();
        std::lock_guard lock(state.mutex);
        ++registration->captures;
    }
    WskProviderNpi->Client = registration;
    WskProviderNpi->Dispatch = &kProviderDispatch;
    return STATUS_SUCCESS;
}

VOID WskReleaseProviderNPI(PWSK_REGISTRATION WskRegistration) {
    Registration* registration = FromRegistration(WskRegistration);
    if (registration == nullptr) return;
    State& state = Wsk();
    std::lock_guard lock(state.mutex);
    if (registration->captures > 0) --registration->captures;
    state.released.notify_all();
}

// Blocks until every captured provider NPI is released, as in Windows.
VOID WskDeregister(PWSK_REGISTRATION WskRegistration) {
    PassiveOnly("WskDeregister");
    Registration* registration = FromRegistration(WskRegistration);
    if (registration == nullptr) return;
    State& state = Wsk();
    std::unique_lock lock(state.mutex);
    while (!state.released.wait_for(lock, std::chrono::seconds(10),
                                    [registration] { return registration->captures == 0; }))
        std::fprintf(stderr, "softndk-km: WskDeregister waits for %u WskReleaseProviderNPI call(s)\n",
                     registration->captures);
    state.registrations.erase(registration);
    for (const auto& [key, device] : state.devices)
        if (device.opens.count(registration) != 0)
            std::fprintf(stderr, "softndk-km: WskDeregister while NDK adapter %p (IfIndex %u) is still open\n",
                         static_cast<void*>(device.adapter), key.index);
    delete registration;
    WskRegistration->ReservedRegistrationState = 0;
}

NTSTATUS SoftNdkKmRegisterInterface(NET_IFINDEX IfIndex, const SOFTNDK_ADAPTER_CONFIG* Config) {
    if (IfIndex == NET_IFINDEX_UNSPECIFIED) return STATUS_INVALID_PARAMETER;
    SOFTNDK_ADAPTER_CONFIG config;
    if (Config == nullptr) {
        SoftNdkInitAdapterConfig(&config);
    } else {
        config = *Config;
    }
    State& state = Wsk();
    std::lock_guard lock(state.mutex);
    state.interfaces[IfIndex] = config;
    return STATUS_SUCCESS;
}

NTSTATUS SoftNdkKmUnregisterInterface(NET_IFINDEX IfIndex) {
    State& state = Wsk();
    std::lock_guard lock(state.mutex);
    return state.interfaces.erase(IfIndex) != 0 ? STATUS_SUCCESS : STATUS_NOT_FOUND;
}

NTSTATUS SoftNdkKmParseFaults(const char* Text, SOFTNDK_ADAPTER_CONFIG* Config) {
    if (Text == nullptr || Config == nullptr) return STATUS_INVALID_PARAMETER;
    // Function names must outlive the adapter config: they are kept for the life of the process.
    static std::mutex names_mutex;
    static auto* names = new std::set<std::string>();
    std::string all(Text);
    size_t start = 0;
    while (start < all.size()) {
        size_t end = all.find(';', start);
        std::string one = all.substr(start, end == std::string::npos ? std::string::npos : end - start);
        start = end == std::string::npos ? all.size() : end + 1;
        if (one.empty()) continue;
        if (Config->FaultRuleCount >= SOFTNDK_MAX_FAULT_RULES) return Invalid("SOFTNDK_FAULTS: too many rules");
        SOFTNDK_FAULT_RULE rule;
        std::string name;
        NTSTATUS status = ParseRule(one, &rule, &name);
        if (!NT_SUCCESS(status)) return status;
        std::lock_guard lock(names_mutex);
        rule.FunctionName = names->insert(name).first->c_str();
        Config->FaultRules[Config->FaultRuleCount++] = rule;
    }
    return STATUS_SUCCESS;
}

NTSTATUS SoftNdkKmConfigureFromEnvironment(void) {
    {
        State& state = Wsk();
        std::lock_guard lock(state.mutex);
        if (!state.interfaces.empty()) return STATUS_SUCCESS;
    }
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    if (const char* mode = std::getenv("SOFTNDK_COMPLETION")) {
        std::string text(mode);
        if (text == "inline") {
            config.CompletionMode = SOFTNDK_COMPLETION_INLINE;
        } else if (text == "pend") {
            config.CompletionMode = SOFTNDK_COMPLETION_PEND;
        } else if (text == "random") {
            config.CompletionMode = SOFTNDK_COMPLETION_RANDOM;
        } else {
            return Invalid("SOFTNDK_COMPLETION must be inline, pend or random");
        }
    }
    if (const char* seed = std::getenv("SOFTNDK_SEED"))
        config.RandomSeed = static_cast<ULONG>(std::strtoul(seed, nullptr, 0));
    if (const char* faults = std::getenv("SOFTNDK_FAULTS")) {
        NTSTATUS status = SoftNdkKmParseFaults(faults, &config);
        if (!NT_SUCCESS(status)) return status;
    }
    return SoftNdkKmRegisterInterface(1, &config);
}

// ---- netioapi.h ----
NTSTATUS GetUnicastIpAddressTable(ADDRESS_FAMILY Family, PMIB_UNICASTIPADDRESS_TABLE* Table) {
    if (Table == nullptr || (Family != AF_UNSPEC && Family != AF_INET && Family != AF_INET6))
        return STATUS_INVALID_PARAMETER;
    SoftNdkKmConfigureFromEnvironment();
    std::vector<MIB_UNICASTIPADDRESS_ROW> rows;
    {
        State& state = Wsk();
        std::lock_guard lock(state.mutex);
        for (const auto& [index, config] : state.interfaces) {
            for (ULONG i = 0; i < config.LocalAddressCount; ++i) {
                const SOCKADDR_INET& address = config.LocalAddresses[i];
                if (Family != AF_UNSPEC && address.si_family != Family) continue;
                MIB_UNICASTIPADDRESS_ROW row{};
                row.Address = address;
                row.InterfaceIndex = index;
                row.InterfaceLuid = LuidOf(index);
                row.PrefixOrigin = IpPrefixOriginManual;
                row.SuffixOrigin = IpSuffixOriginManual;
                row.ValidLifetime = row.PreferredLifetime = 0xffffffff;
                row.OnLinkPrefixLength = address.si_family == AF_INET ? 8 : 128;
                row.DadState = IpDadStatePreferred;
                rows.push_back(row);
            }
        }
    }
    const SIZE_T bytes = offsetof(MIB_UNICASTIPADDRESS_TABLE, Table) +
                         (rows.empty() ? 1 : rows.size()) * sizeof(MIB_UNICASTIPADDRESS_ROW);
    auto* table = static_cast<PMIB_UNICASTIPADDRESS_TABLE>(ExAllocatePoolWithTag(PagedPool, bytes, 'biMN'));
    if (table == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
    table->NumEntries = static_cast<ULONG>(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) table->Table[i] = rows[i];
    *Table = table;
    return STATUS_SUCCESS;
}

VOID FreeMibTable(PVOID Memory) {
    if (Memory != nullptr) ExFreePoolWithTag(Memory, 'biMN');
}

NTSTATUS ConvertInterfaceIndexToLuid(NET_IFINDEX InterfaceIndex, PNET_LUID InterfaceLuid) {
    if (InterfaceLuid == nullptr) return STATUS_INVALID_PARAMETER;
    SoftNdkKmConfigureFromEnvironment();
    if (!Registered(InterfaceIndex)) return STATUS_NOT_FOUND;
    *InterfaceLuid = LuidOf(InterfaceIndex);
    return STATUS_SUCCESS;
}

NTSTATUS ConvertInterfaceLuidToIndex(const NET_LUID* InterfaceLuid, PNET_IFINDEX InterfaceIndex) {
    if (InterfaceLuid == nullptr || InterfaceIndex == nullptr) return STATUS_INVALID_PARAMETER;
    SoftNdkKmConfigureFromEnvironment();
    const NET_IFINDEX index = IndexOf(*InterfaceLuid);
    if (index == NET_IFINDEX_UNSPECIFIED) return STATUS_NOT_FOUND;
    *InterfaceIndex = index;
    return STATUS_SUCCESS;
}

// Issue 19 §1: the alias names the interface by its index ("softndk 1"); a LUID that names no registered
// interface is an invalid parameter, as on Windows.
NTSTATUS ConvertInterfaceLuidToAlias(const NET_LUID* InterfaceLuid, PWSTR InterfaceAlias, SIZE_T Length) {
    if (InterfaceLuid == nullptr || InterfaceAlias == nullptr) return STATUS_INVALID_PARAMETER;
    SoftNdkKmConfigureFromEnvironment();
    const NET_IFINDEX index = IndexOf(*InterfaceLuid);
    if (index == NET_IFINDEX_UNSPECIFIED) return STATUS_INVALID_PARAMETER;
    const std::wstring alias = AliasOf(index);
    if (Length < alias.size() + 1) return STATUS_NO_MEMORY;
    std::wmemcpy(InterfaceAlias, alias.c_str(), alias.size() + 1);
    return STATUS_SUCCESS;
}

NTSTATUS ConvertInterfaceAliasToLuid(PCWSTR InterfaceAlias, PNET_LUID InterfaceLuid) {
    if (InterfaceAlias == nullptr || InterfaceLuid == nullptr) return STATUS_INVALID_PARAMETER;
    SoftNdkKmConfigureFromEnvironment();
    State& state = Wsk();
    std::lock_guard lock(state.mutex);
    for (const auto& entry : state.interfaces) {
        if (AliasOf(entry.first) != InterfaceAlias) continue;
        *InterfaceLuid = LuidOf(entry.first);
        return STATUS_SUCCESS;
    }
    return STATUS_INVALID_PARAMETER;
}

}  // extern "C"
