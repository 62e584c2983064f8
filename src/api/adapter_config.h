// SOFTNDK_ADAPTER_CONFIG defaults and validation (issue 2 §2, AI-01 … AI-09).
#pragma once

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
// STATUS_SUCCESS, NDIS_STATUS_BAD_VERSION, STATUS_NOT_SUPPORTED or STATUS_INVALID_PARAMETER (last-error text).
NTSTATUS ValidateAdapterConfig(const SOFTNDK_ADAPTER_CONFIG& config);

}  // namespace softndk::api
