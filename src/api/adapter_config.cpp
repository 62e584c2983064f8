#include "api/adapter_config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/last_error.h"

namespace softndk::api {
namespace {

bool HasIpcLockCapability() {
    FILE* status = std::fopen("/proc/self/status", "r");
    if (status == nullptr) return false;
    char line[256];
    unsigned long long effective = 0;
    while (std::fgets(line, sizeof(line), status) != nullptr)
        if (std::sscanf(line, "CapEff: %llx", &effective) == 1) break;
    std::fclose(status);
    constexpr int kCapIpcLock = 14;
    return (effective >> kCapIpcLock) & 1;
}

NTSTATUS InvalidParameter(const char* why) {
    SetLastErrorText("SoftNdkOpenAdapter: %s", why);
    return STATUS_INVALID_PARAMETER;
}

}  // namespace

uint64_t LockableBytes() {
    const uint64_t physical = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * PAGE_SIZE;
    rlimit limit{};
    if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || HasIpcLockCapability())
        return physical;
    return limit.rlim_cur < physical ? limit.rlim_cur : physical;
}

NDK_ADAPTER_INFO DefaultAdapterInfo() {
    NDK_ADAPTER_INFO info{};
    info.Version = NDK_VERSION{NDK_VERSION_MAJOR, NDK_VERSION_1_2_MINOR};
    info.VendorId = 0;  // no OUI: a software adapter
    info.DeviceId = 0x5D4B;
    info.MaxRegistrationSize = LockableBytes();
    info.MaxWindowSize = info.MaxRegistrationSize;
    // FR-23: at least 16; up to 256 as far as the lockable memory could back them.
    info.FRMRPageCount = static_cast<ULONG>(std::clamp<uint64_t>(info.MaxRegistrationSize / PAGE_SIZE, 16, 256));
    info.MaxInitiatorRequestSge = 32;
    info.MaxReceiveRequestSge = 32;
    info.MaxReadRequestSge = 32;
    info.MaxTransferLength = 1u << 30;
    info.MaxInlineDataSize = 256;
    info.MaxInboundReadLimit = 128;
    info.MaxOutboundReadLimit = 128;
    info.MaxReceiveQueueDepth = 16384;
    info.MaxInitiatorQueueDepth = 16384;
    info.MaxSrqDepth = 16384;
    info.MaxCqDepth = 65536;
    info.LargeRequestThreshold = 16384;
    info.MaxCallerData = 196;  // fits MPA v2 private data with room for the RDMAP/IRD-ORD header
    info.MaxCalleeData = 196;
    info.AdapterFlags = kHonouredAdapterFlags;
    info.RdmaTechnology = NdkiWarp;  // issue 7: iWARP over TCP (MPA v2 / DDP / RDMAP)
    return info;
}

bool NegotiateVersion(NDK_VERSION requested, NDK_VERSION* negotiated) {
    // AI-08: the major must be one we speak; a minor above our highest in that major is refused; a lower one
    // gets our highest (higher minors are supersets). 2.1 is 1.2 plus the 2.1 connector slots and
    // ProviderErrorCode, which softndk has (spec decision "NDK 2.x").
    if (requested.Major == NDK_VERSION_MAJOR && requested.Minor <= NDK_VERSION_1_2_MINOR) {
        *negotiated = NDK_VERSION{NDK_VERSION_MAJOR, NDK_VERSION_1_2_MINOR};
        return true;
    }
    if (requested.Major == NDK_VERSION_2_MAJOR && requested.Minor <= NDK_VERSION_2_1_MINOR) {
        *negotiated = NDK_VERSION{NDK_VERSION_2_MAJOR, NDK_VERSION_2_1_MINOR};
        return true;
    }
    return false;
}

NTSTATUS ValidateAdapterConfig(const SOFTNDK_ADAPTER_CONFIG& config) {
    if (config.Size != sizeof(SOFTNDK_ADAPTER_CONFIG) || config.Version != SOFTNDK_ADAPTER_CONFIG_VERSION)
        return InvalidParameter("Config.Size/Version do not match this softndk (call SoftNdkInitAdapterConfig)");
    NDK_VERSION negotiated;
    if (!NegotiateVersion(config.RequestedVersion, &negotiated)) {
        SetLastErrorText("SoftNdkOpenAdapter: NDKPI %u.%u requested; this provider supports 1.0 … 1.2 and 2.0 … 2.1",
                         config.RequestedVersion.Major, config.RequestedVersion.Minor);
        return NDIS_STATUS_BAD_VERSION;
    }
    if (config.CompletionMode != SOFTNDK_COMPLETION_INLINE && config.CompletionMode != SOFTNDK_COMPLETION_PEND &&
        config.CompletionMode != SOFTNDK_COMPLETION_RANDOM)
        return InvalidParameter("unknown CompletionMode");
    if (config.Transport > SOFTNDK_TRANSPORT_TCP)
        return InvalidParameter("unknown Transport (SOFTNDK_TRANSPORT is auto, inproc, deferred or tcp)");
    if (config.ProgressThreads == 0 || config.ProgressThreads > 16)
        return InvalidParameter("ProgressThreads must be 1 … 16");
    if (config.BusyPollMicroseconds > 1000000) return InvalidParameter("BusyPollMicroseconds above one second");
    if (config.MpaCrc > 1) return InvalidParameter("MpaCrc must be 0 or 1");
    if (config.MpaRtr > SOFTNDK_MPA_RTR_READ)
        return InvalidParameter("unknown MpaRtr (SOFTNDK_MPA_RTR is write or read)");
    if (config.RtrKicks > 1) return InvalidParameter("RtrKicks must be 0 or 1 (SOFTNDK_RTR_KICKS)");
    if (config.AcceptTimeoutMs > 3600000)
        return InvalidParameter("AcceptTimeoutMs above one hour (SOFTNDK_ACCEPT_TIMEOUT_MS; 0 = no limit)");
    if (config.MpaRequestTimeoutMs > 3600000)
        return InvalidParameter("MpaRequestTimeoutMs above one hour (SOFTNDK_MPA_REQUEST_TIMEOUT_MS; 0 = no limit)");
    if (config.MaxHalfOpen > 65536)
        return InvalidParameter("MaxHalfOpen above 65536 (SOFTNDK_MAX_HALF_OPEN; 0 = no cap)");
    if (config.AcceptRetryMs == 0 || config.AcceptRetryMs > 60000)
        return InvalidParameter("AcceptRetryMs must be 1 … 60000 (SOFTNDK_ACCEPT_RETRY_MS)");
    if (config.DisconnectTimeoutMs == 0 || config.DisconnectTimeoutMs > 3600000)
        return InvalidParameter("DisconnectTimeoutMs must be 1 … 3600000 (SOFTNDK_DISCONNECT_TIMEOUT_MS)");
    if (config.PeerStallTimeoutMs == 0 || config.PeerStallTimeoutMs > 3600000)
        return InvalidParameter("PeerStallTimeoutMs must be 1 … 3600000 (SOFTNDK_PEER_STALL_TIMEOUT_MS)");
    if (config.HostAddresses > 1) return InvalidParameter("HostAddresses must be 0 or 1 (SOFTNDK_HOST_ADDRESSES)");
    if (config.DeferBackstopMs > 60000)
        return InvalidParameter("DeferBackstopMs must be 0 … 60000 (SOFTNDK_DEFER_BACKSTOP_MS)");
    if (config.RotateFastRegisterKeys > 1)
        return InvalidParameter("RotateFastRegisterKeys must be 0 or 1 (SOFTNDK_ROTATE_FR_KEYS)");
    if (std::memchr(config.InterfaceName, 0, sizeof(config.InterfaceName)) == nullptr)
        return InvalidParameter("InterfaceName is not NUL-terminated");
    if (std::memchr(config.TracePath, 0, sizeof(config.TracePath)) == nullptr)
        return InvalidParameter("TracePath is not NUL-terminated");
    if (config.FaultRuleCount > SOFTNDK_MAX_FAULT_RULES)
        return InvalidParameter("FaultRuleCount > SOFTNDK_MAX_FAULT_RULES");
    if (config.LocalAddressCount == 0 || config.LocalAddressCount > SOFTNDK_MAX_LOCAL_ADDRESSES)
        return InvalidParameter("LocalAddressCount must be 1 … SOFTNDK_MAX_LOCAL_ADDRESSES");
    for (ULONG i = 0; i < config.LocalAddressCount; ++i)
        if (config.LocalAddresses[i].si_family != AF_INET && config.LocalAddresses[i].si_family != AF_INET6)
            return InvalidParameter("a local address is neither AF_INET nor AF_INET6");

    const NDK_ADAPTER_INFO& want = config.Limits;
    const NDK_ADAPTER_INFO honest = DefaultAdapterInfo();
    if ((want.AdapterFlags & ~kHonouredAdapterFlags) != 0) {
        SetLastErrorText("SoftNdkOpenAdapter: AdapterFlags 0x%x name capabilities softndk does not honour yet",
                         want.AdapterFlags & ~kHonouredAdapterFlags);
        return STATUS_NOT_SUPPORTED;
    }
    if (want.MaxRegistrationSize < PAGE_SIZE || want.MaxRegistrationSize > honest.MaxRegistrationSize)
        return InvalidParameter("Limits.MaxRegistrationSize must be PAGE_SIZE … what the machine can lock");
    if (want.MaxWindowSize == 0 || want.MaxWindowSize > want.MaxRegistrationSize)
        return InvalidParameter("Limits.MaxWindowSize must be 1 … MaxRegistrationSize");
    if (want.FRMRPageCount < 16 || want.FRMRPageCount > honest.FRMRPageCount) {
        SetLastErrorText("SoftNdkOpenAdapter: Limits.FRMRPageCount = %u; allowed 16 (FR-23) … %u", want.FRMRPageCount,
                         honest.FRMRPageCount);
        return STATUS_INVALID_PARAMETER;
    }
    struct Field {
        ULONG want;
        ULONG honest;
        bool zero_ok;
        const char* name;
    };
    const Field fields[] = {
        {want.MaxInitiatorRequestSge, honest.MaxInitiatorRequestSge, false, "MaxInitiatorRequestSge"},
        {want.MaxReceiveRequestSge, honest.MaxReceiveRequestSge, false, "MaxReceiveRequestSge"},
        {want.MaxReadRequestSge, honest.MaxReadRequestSge, false, "MaxReadRequestSge"},
        {want.MaxTransferLength, honest.MaxTransferLength, false, "MaxTransferLength"},
        {want.MaxInlineDataSize, honest.MaxInlineDataSize, true, "MaxInlineDataSize"},
        {want.MaxInboundReadLimit, honest.MaxInboundReadLimit, true, "MaxInboundReadLimit"},
        {want.MaxOutboundReadLimit, honest.MaxOutboundReadLimit, true, "MaxOutboundReadLimit"},
        {want.MaxReceiveQueueDepth, honest.MaxReceiveQueueDepth, false, "MaxReceiveQueueDepth"},
        {want.MaxInitiatorQueueDepth, honest.MaxInitiatorQueueDepth, false, "MaxInitiatorQueueDepth"},
        {want.MaxSrqDepth, honest.MaxSrqDepth, true, "MaxSrqDepth"},
        {want.MaxCqDepth, honest.MaxCqDepth, false, "MaxCqDepth"},
        {want.MaxCallerData, honest.MaxCallerData, true, "MaxCallerData"},
        {want.MaxCalleeData, honest.MaxCalleeData, true, "MaxCalleeData"},
    };
    for (const Field& field : fields) {
        if (field.want > field.honest || (field.want == 0 && !field.zero_ok)) {
            SetLastErrorText("SoftNdkOpenAdapter: Limits.%s = %u; allowed %s … %u", field.name, field.want,
                             field.zero_ok ? "0" : "1", field.honest);
            return STATUS_INVALID_PARAMETER;
        }
    }
    uint32_t technology = 0;  // read as an integer: an out-of-range enum value must not be loaded as the enum
    static_assert(sizeof(technology) == sizeof(want.RdmaTechnology));
    std::memcpy(&technology, &want.RdmaTechnology, sizeof(technology));
    if (technology >= NdkMaxTechnology) return InvalidParameter("Limits.RdmaTechnology out of range");
    return STATUS_SUCCESS;
}

NTSTATUS InterfaceAddresses(const char* name, ULONG index, std::vector<SOCKADDR_INET>* out, std::string* found_name) {
    char by_index[IF_NAMESIZE] = {};
    if (name == nullptr || name[0] == 0) {
        if (if_indextoname(index, by_index) == nullptr) {
            SetLastErrorText("SoftNdkOpenAdapter: no network interface has index %u", index);
            return STATUS_NOT_FOUND;
        }
        name = by_index;
    } else if (if_nametoindex(name) == 0) {
        SetLastErrorText("SoftNdkOpenAdapter: no network interface is named \"%s\"", name);
        return STATUS_NOT_FOUND;
    }
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return STATUS_INSUFFICIENT_RESOURCES;
    std::vector<SOCKADDR_INET> addresses;
    for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
        if (entry->ifa_addr == nullptr || std::strcmp(entry->ifa_name, name) != 0) continue;
        SOCKADDR_INET address{};
        if (entry->ifa_addr->sa_family == AF_INET) {
            std::memcpy(&address.Ipv4, entry->ifa_addr, sizeof(address.Ipv4));
        } else if (entry->ifa_addr->sa_family == AF_INET6) {
            std::memcpy(&address.Ipv6, entry->ifa_addr, sizeof(address.Ipv6));
        } else {
            continue;
        }
        if (addresses.size() < SOFTNDK_MAX_LOCAL_ADDRESSES) addresses.push_back(address);
    }
    freeifaddrs(list);
    if (addresses.empty()) {
        SetLastErrorText("SoftNdkOpenAdapter: interface \"%s\" has no IPv4 or IPv6 address", name);
        return STATUS_INVALID_ADDRESS;
    }
    *out = std::move(addresses);
    *found_name = name;
    return STATUS_SUCCESS;
}

std::vector<SOCKADDR_INET> HostAddressList() {
    std::vector<SOCKADDR_INET> addresses;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return addresses;
    for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
        if (entry->ifa_addr == nullptr) continue;
        SOCKADDR_INET address{};
        if (entry->ifa_addr->sa_family == AF_INET)
            std::memcpy(&address.Ipv4, entry->ifa_addr, sizeof(address.Ipv4));
        else if (entry->ifa_addr->sa_family == AF_INET6)
            std::memcpy(&address.Ipv6, entry->ifa_addr, sizeof(address.Ipv6));
        else
            continue;
        addresses.push_back(address);
    }
    freeifaddrs(list);
    return addresses;
}

bool HostHasAddress(int family, const uint8_t* address) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return false;
    bool found = false;
    for (ifaddrs* entry = list; entry != nullptr && !found; entry = entry->ifa_next) {
        if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != family) continue;
        if (family == AF_INET)
            found = std::memcmp(&reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr, address, 4) == 0;
        else
            found = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr)->sin6_addr, address, 16) == 0;
    }
    freeifaddrs(list);
    return found;
}

}  // namespace softndk::api

namespace {
// A numeric setting from the environment, when set. Anything but a whole number below 2^32 - 1 (empty, a word, a
// sign, an overflow) reads as 0xFFFFFFFF, which every bound refuses, so SoftNdkOpenAdapter names the setting;
// before, "abc" read as 0, which for some settings means "no limit".
void NumberFromEnvironment(const char* name, ULONG* setting) {
    const char* value = std::getenv(name);
    if (value == nullptr) return;
    char* end = nullptr;
    errno = 0;
    const unsigned long long number = std::strtoull(value, &end, 10);
    const bool whole = value[0] >= '0' && value[0] <= '9' && *end == '\0' && errno == 0;
    *setting = whole && number < 0xFFFFFFFFull ? static_cast<ULONG>(number) : 0xFFFFFFFFu;
}
}  // namespace

extern "C" VOID SoftNdkInitAdapterConfig(SOFTNDK_ADAPTER_CONFIG* Config) {
    if (Config == nullptr) return;
    std::memset(Config, 0, sizeof(*Config));
    Config->Size = sizeof(SOFTNDK_ADAPTER_CONFIG);
    Config->Version = SOFTNDK_ADAPTER_CONFIG_VERSION;
    Config->RequestedVersion = NDK_VERSION{NDK_VERSION_MAJOR, NDK_VERSION_1_2_MINOR};
    Config->CompletionMode = SOFTNDK_COMPLETION_INLINE;
    Config->AcceptTimeoutMs = 30000;
    Config->Transport = SOFTNDK_TRANSPORT_AUTO;
    Config->ProgressThreads = 1;
    Config->BusyPollMicroseconds = 50;
    Config->RtrKicks = 1;
    Config->MpaRequestTimeoutMs = 5000;  // Linux siw's responder waits 5 s for the Request (siw_cm.h)
    Config->MaxHalfOpen = 256;
    Config->AcceptRetryMs = 100;
    Config->DisconnectTimeoutMs = 60000;  // Chelsio iw_cxgb4's ep_timeout_secs, Linux's tcp_fin_timeout
    Config->PeerStallTimeoutMs = 60000;
    Config->HostAddresses = 1;
    Config->DeferBackstopMs = 10;
    if (const char* transport = std::getenv("SOFTNDK_TRANSPORT")) {
        const std::string name = transport;
        Config->Transport = 0xFFFFFFFFu;  // refused by SoftNdkOpenAdapter, which says why
        if (name == "auto") Config->Transport = SOFTNDK_TRANSPORT_AUTO;
        if (name == "inproc") Config->Transport = SOFTNDK_TRANSPORT_IN_PROCESS;
        if (name == "deferred") Config->Transport = SOFTNDK_TRANSPORT_IN_PROCESS_DEFERRED;
        if (name == "tcp") Config->Transport = SOFTNDK_TRANSPORT_TCP;
    }
    if (const char* crc = std::getenv("SOFTNDK_MPA_CRC")) Config->MpaCrc = std::string(crc) == "1" ? 1 : 0;
    if (const char* rtr = std::getenv("SOFTNDK_MPA_RTR")) {
        const std::string name = rtr;
        Config->MpaRtr = 0xFFFFFFFFu;  // refused by SoftNdkOpenAdapter, which says why
        if (name == "write") Config->MpaRtr = SOFTNDK_MPA_RTR_WRITE;
        if (name == "read") Config->MpaRtr = SOFTNDK_MPA_RTR_READ;
    }
    // Each refused by SoftNdkOpenAdapter when out of range or not a whole number.
    NumberFromEnvironment("SOFTNDK_RTR_KICKS", &Config->RtrKicks);
    NumberFromEnvironment("SOFTNDK_ACCEPT_TIMEOUT_MS", &Config->AcceptTimeoutMs);
    NumberFromEnvironment("SOFTNDK_MPA_REQUEST_TIMEOUT_MS", &Config->MpaRequestTimeoutMs);
    NumberFromEnvironment("SOFTNDK_MAX_HALF_OPEN", &Config->MaxHalfOpen);
    NumberFromEnvironment("SOFTNDK_ACCEPT_RETRY_MS", &Config->AcceptRetryMs);
    NumberFromEnvironment("SOFTNDK_DISCONNECT_TIMEOUT_MS", &Config->DisconnectTimeoutMs);
    NumberFromEnvironment("SOFTNDK_PEER_STALL_TIMEOUT_MS", &Config->PeerStallTimeoutMs);
    NumberFromEnvironment("SOFTNDK_ROTATE_FR_KEYS", &Config->RotateFastRegisterKeys);
    NumberFromEnvironment("SOFTNDK_DEFER_BACKSTOP_MS", &Config->DeferBackstopMs);
    NumberFromEnvironment("SOFTNDK_HOST_ADDRESSES", &Config->HostAddresses);
    if (const char* name = std::getenv("SOFTNDK_INTERFACE"))
        std::snprintf(Config->InterfaceName, sizeof(Config->InterfaceName), "%s", name);
    NumberFromEnvironment("SOFTNDK_BUSY_POLL_US", &Config->BusyPollMicroseconds);
    NumberFromEnvironment("SOFTNDK_PROGRESS_THREADS", &Config->ProgressThreads);
    if (const char* path = std::getenv("SOFTNDK_TRACE"))
        std::snprintf(Config->TracePath, sizeof(Config->TracePath), "%s", path);
    Config->Limits = softndk::api::DefaultAdapterInfo();
    Config->LocalAddressCount = 2;
    SOCKADDR_IN& v4 = Config->LocalAddresses[0].Ipv4;
    v4.sin_family = AF_INET;
    v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    SOCKADDR_IN6& v6 = Config->LocalAddresses[1].Ipv6;
    v6.sin6_family = AF_INET6;
    std::memcpy(&v6.sin6_addr, &in6addr_loopback, sizeof(v6.sin6_addr));
}
