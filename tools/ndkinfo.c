/* ndkinfo: the adapter's NDK_ADAPTER_INFO, printed the way ibv_devinfo prints a device, then its interface,
 * addresses and transport (SoftNdkQueryAdapterDetails). */
#include <arpa/inet.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

#include "ndk_wait.h"

/* In the unit that reads best: 8 MiB, not "0.0 GiB" (issue 20). */
static void print_size(const char* name, unsigned long long bytes) {
    static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double value = (double)bytes;
    int unit = 0;
    while (value >= 1024 && unit < 4) {
        value /= 1024;
        ++unit;
    }
    printf("\t%-28s%llu (%.1f %s)\n", name, bytes, value, units[unit]);
}

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) { /* issue 20 §1: no flag but help */
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf(
                "usage: ndkinfo\n"
                "  prints softndk's adapter as ibv_devinfo prints a device: NDK_ADAPTER_INFO's limits, then the\n"
                "  interface, addresses and transport. SOFTNDK_INTERFACE=NAME binds the adapter to one interface.\n");
            return 0;
        }
        fprintf(stderr, "ndkinfo: unknown flag %s; see ndkinfo --help\n", argv[i]);
        return 2;
    }
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    NDK_ADAPTER* adapter = NULL;
    ndk_check(SoftNdkOpenAdapter(&config, &adapter), "SoftNdkOpenAdapter");
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof(info);
    ndk_check(adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size), "NdkQueryAdapterInfo");

    static const char* technologies[] = {"undefined (in-process link only)", "iWARP", "InfiniBand", "RoCE", "RoCEv2"};
    printf("hca_id:\tsoftndk0\n");
    printf("\t%-28s%s (%d)\n", "transport:", technologies[info.RdmaTechnology], (int)info.RdmaTechnology);
    printf("\t%-28s%u.%u\n", "ndk_version:", info.Version.Major, info.Version.Minor);
    printf("\t%-28s0x%06x\n", "vendor_id:", info.VendorId);
    printf("\t%-28s0x%04x\n", "device_id:", info.DeviceId);
    print_size("max_registration_size:", info.MaxRegistrationSize);
    const unsigned long long physical = (unsigned long long)sysconf(_SC_PHYS_PAGES) * PAGE_SIZE;
    if (info.MaxRegistrationSize < physical) {
        struct rlimit memlock;
        getrlimit(RLIMIT_MEMLOCK, &memlock);
        printf("\t%-28sRLIMIT_MEMLOCK %llu bytes (raise with ulimit -l, or run with CAP_IPC_LOCK)\n",
               "registration_limited_by:", (unsigned long long)memlock.rlim_cur);
    }
    print_size("max_window_size:", info.MaxWindowSize);
    printf("\t%-28s%u\n", "frmr_page_count:", info.FRMRPageCount);
    printf("\t%-28s%u\n", "max_initiator_sge:", info.MaxInitiatorRequestSge);
    printf("\t%-28s%u\n", "max_receive_sge:", info.MaxReceiveRequestSge);
    printf("\t%-28s%u\n", "max_read_sge:", info.MaxReadRequestSge);
    printf("\t%-28s%u\n", "max_transfer_length:", info.MaxTransferLength);
    printf("\t%-28s%u\n", "max_inline_data:", info.MaxInlineDataSize);
    printf("\t%-28s%u\n", "max_inbound_read_limit:", info.MaxInboundReadLimit);
    printf("\t%-28s%u\n", "max_outbound_read_limit:", info.MaxOutboundReadLimit);
    printf("\t%-28s%u\n", "max_receive_queue_depth:", info.MaxReceiveQueueDepth);
    printf("\t%-28s%u\n", "max_initiator_queue_depth:", info.MaxInitiatorQueueDepth);
    printf("\t%-28s%u\n", "max_srq_depth:", info.MaxSrqDepth);
    printf("\t%-28s%u\n", "max_cq_depth:", info.MaxCqDepth);
    printf("\t%-28s%u\n", "large_request_threshold:", info.LargeRequestThreshold);
    printf("\t%-28s%u\n", "max_caller_data:", info.MaxCallerData);
    printf("\t%-28s%u\n", "max_callee_data:", info.MaxCalleeData);
    printf("\t%-28s0x%08x\n", "adapter_flags:", info.AdapterFlags);
    static const struct {
        ULONG flag;
        const char* name;
    } flags[] = {
        {NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED, "IN_ORDER_DMA_SUPPORTED"},
        {NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, "RDMA_READ_SINK_NOT_REQUIRED"},
        {NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED, "CQ_INTERRUPT_MODERATION_SUPPORTED"},
        {NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED, "MULTI_ENGINE_SUPPORTED"},
        {NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED, "RDMA_READ_LOCAL_INVALIDATE_SUPPORTED"},
        {NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED, "CQ_RESIZE_SUPPORTED"},
        {NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED, "LOOPBACK_CONNECTIONS_SUPPORTED"},
    };
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); ++i)
        if (info.AdapterFlags & flags[i].flag) printf("\t%-28s%s\n", "", flags[i].name);
    SOFTNDK_ADAPTER_DETAILS details;
    memset(&details, 0, sizeof(details));
    details.Size = sizeof(details);
    ndk_check(SoftNdkQueryAdapterDetails(adapter, &details), "SoftNdkQueryAdapterDetails");
    static const char* transports[] = {"auto (in-process to this process's listeners, else iWARP/TCP)", "in-process",
                                       "in-process, deferred", "iWARP/TCP (MPA v2, DDP, RDMAP)"};
    printf("\t%-28s%s\n", "wire_transport:", details.Transport <= 3 ? transports[details.Transport] : "?");
    printf("\t%-28s%s\n", "mpa_crc:", details.MpaCrc ? "requested" : "if the peer asks");
    printf("\t%-28s%s\n",
           "mpa_rtr:", details.MpaRtr == SOFTNDK_MPA_RTR_READ ? "zero-length read" : "zero-length write");
    printf("\t%-28s%u (busy-poll %u us)\n", "progress_threads:", details.ProgressThreads, details.BusyPollMicroseconds);
    if (details.InterfaceName[0] != 0)
        printf("\t%-28s%s (index %u)\n", "interface:", details.InterfaceName, details.InterfaceIndex);
    else
        printf("\t%-28s%s\n", "interface:", "none (the configured addresses; SOFTNDK_INTERFACE binds one)");
    for (ULONG i = 0; i < details.LocalAddressCount; ++i) {
        char text[INET6_ADDRSTRLEN];
        const SOCKADDR_INET* address = &details.LocalAddresses[i];
        if (address->si_family == AF_INET)
            inet_ntop(AF_INET, &address->Ipv4.sin_addr, text, sizeof(text));
        else
            inet_ntop(AF_INET6, &address->Ipv6.sin6_addr, text, sizeof(text));
        printf("\t%-28s%s\n", i == 0 ? "local_addresses:" : "", text);
    }
    return SoftNdkCloseAdapter(adapter) == STATUS_SUCCESS ? 0 : 1;
}
