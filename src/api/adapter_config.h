// SOFTNDK_ADAPTER_CONFIG defaults and validation (issue 2 §2, AI-01 … AI-09).
#pragma once

#include <string>
#include <vector>

#include <softndk/softndk.h>

namespace softndk::api {

// What this machine can lock: physical memory when privileged (root, CAP_IPC_LOCK or no RLIMIT_MEMLOCK),
// otherwise RLIMIT_MEMLOCK. Never an artificial cap (AI-03).
uint64_t LockableBytes();
// The provider's true limits: advertising more than these is refused at open.
NDK_ADAPTER_INFO DefaultAdapterInfo();
// Flags the provider honours and may advertise; a config may clear these, never add others.
constexpr ULONG kHonouredAdapterFlags = NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED |
                                        NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED |
                                        NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED;
// AI-08: the version an open with `requested` negotiates, per major: 1.0 … 1.2 give 1.2, 2.0 … 2.1 give 2.1
// (spec decision "NDK 2.x"). false for any other request (NDIS_STATUS_BAD_VERSION).
bool NegotiateVersion(NDK_VERSION requested, NDK_VERSION* negotiated);
// STATUS_SUCCESS, NDIS_STATUS_BAD_VERSION, STATUS_NOT_SUPPORTED or STATUS_INVALID_PARAMETER (last-error text).
NTSTATUS ValidateAdapterConfig(const SOFTNDK_ADAPTER_CONFIG& config);
// Issue 7 §4: the IPv4/IPv6 addresses of the interface named `name` (or with index `index` when `name` is
// empty). STATUS_NOT_FOUND for no such interface, STATUS_INVALID_ADDRESS for one without addresses.
NTSTATUS InterfaceAddresses(const char* name, ULONG index, std::vector<SOCKADDR_INET>* out, std::string* found_name);
// Issue 20 §1: whether one of this host's interfaces has `address` (16 bytes for AF_INET6, 4 for AF_INET) now.
bool HostHasAddress(int family, const uint8_t* address);
// Every IPv4 and IPv6 address of this host's interfaces now (empty when they cannot be read).
std::vector<SOCKADDR_INET> HostAddressList();

}  // namespace softndk::api
