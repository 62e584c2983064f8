// AI-01 … AI-11, LIFE-03/15, and SOFTNDK_ADAPTER_CONFIG validation.
#include "api/adapter_config.h"
#include "api/objects.h"
#include "engine/transport.h"
#include "support/ndk_test_support.h"
#include "support/unprivileged_child.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <string>

namespace softndk::test {
namespace {

class AdapterInfoTest : public AdapterTest {};
SOFTNDK_ALL_MODES(AdapterInfoTest);

TEST_P(AdapterInfoTest, AI_01_QueryReportsSizeAndRejectsSmallBuffers) {
    NDK_ADAPTER_INFO info{};
    ULONG size = sizeof(info) - 1;
    EXPECT_EQ(adapter_->Dispatch->NdkQueryAdapterInfo(adapter_, &info, &size), STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(size, sizeof(NDK_ADAPTER_INFO));
    size = 0;
    EXPECT_EQ(adapter_->Dispatch->NdkQueryAdapterInfo(adapter_, nullptr, &size), STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(size, sizeof(NDK_ADAPTER_INFO));
    EXPECT_EQ(adapter_->Dispatch->NdkQueryAdapterInfo(adapter_, &info, nullptr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(adapter_->Dispatch->NdkQueryAdapterInfo(nullptr, &info, &size), STATUS_INVALID_PARAMETER);
    size = sizeof(info) + 16;
    EXPECT_EQ(adapter_->Dispatch->NdkQueryAdapterInfo(adapter_, &info, &size), STATUS_SUCCESS);
    EXPECT_EQ(size, sizeof(NDK_ADAPTER_INFO));
}

TEST_P(AdapterInfoTest, AI_03_MaxRegistrationSizeIsWhatTheMachineCanLockWithNoArtificialCap) {
    NDK_ADAPTER_INFO info = Info();
    EXPECT_EQ(info.MaxRegistrationSize, api::LockableBytes());
    const uint64_t physical = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * PAGE_SIZE;
    if (geteuid() == 0) {
        EXPECT_EQ(info.MaxRegistrationSize, physical);
    }
    EXPECT_NE(info.MaxRegistrationSize, 4ull << 30);
    EXPECT_NE(info.MaxRegistrationSize, 128ull << 30);
    EXPECT_LE(info.MaxWindowSize, info.MaxRegistrationSize);
}

TEST_P(AdapterInfoTest, FR_23_FrmrPageCountIsWhatTheLockableMemoryBacksBetween16And256) {
    const NDK_ADAPTER_INFO info = Info();
    EXPECT_GE(info.FRMRPageCount, 16u);
    EXPECT_EQ(info.FRMRPageCount, std::clamp<uint64_t>(api::LockableBytes() / PAGE_SIZE, 16, 256));
}

// Review finding 7: the defaults open for any user. A child without CAP_IPC_LOCK and with a small RLIMIT_MEMLOCK
// (one page; 64 KiB, the old Linux default) opens an adapter from SoftNdkInitAdapterConfig and sees the limit.
TEST(AdapterDefaultsTest, FR_23_AI_03_DefaultConfigOpensUnderASmallMemlockLimit) {
    for (const rlim_t limit : {static_cast<rlim_t>(PAGE_SIZE), static_cast<rlim_t>(64 * 1024)}) {
        const int status = RunUnprivileged(limit, [limit] {
            SOFTNDK_ADAPTER_CONFIG config;
            SoftNdkInitAdapterConfig(&config);
            NDK_ADAPTER* adapter = nullptr;
            const NTSTATUS opened = SoftNdkOpenAdapter(&config, &adapter);
            if (opened != STATUS_SUCCESS) {
                fprintf(stderr, "child: 0x%08X %s\n", static_cast<unsigned>(opened), SoftNdkGetLastErrorText());
                return 1;
            }
            NDK_ADAPTER_INFO info{};
            ULONG size = sizeof(info);
            adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size);
            const bool honest = info.MaxRegistrationSize == limit && info.FRMRPageCount >= 16;
            return SoftNdkCloseAdapter(adapter) == STATUS_SUCCESS && honest ? 0 : 2;
        });
        if (status == kCannotDrop) GTEST_SKIP() << "cannot drop CAP_IPC_LOCK here";
        EXPECT_EQ(status, 0) << "RLIMIT_MEMLOCK " << limit << ": the default config must open";
    }
}

TEST_P(AdapterInfoTest, AI_07_QP_22_CM_32_AdvertisesOnlyFlagsItHonours) {
    NDK_ADAPTER_INFO info = Info();
    EXPECT_NE(info.AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, 0u);
    EXPECT_NE(info.AdapterFlags & NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED, 0u);
    EXPECT_EQ(info.AdapterFlags & ~api::kHonouredAdapterFlags, 0u);
    EXPECT_EQ(info.RdmaTechnology, NdkiWarp) << "iWARP over TCP (MPA v2 / DDP / RDMAP) is what the wire speaks";
}

TEST_P(AdapterInfoTest, AI_08_HeadersCarryTheNegotiatedVersion) {
    EXPECT_EQ(adapter_->Header.ObjectType, NdkObjectTypeAdapter);
    EXPECT_EQ(Info().Version.Major, 1);
    EXPECT_EQ(Info().Version.Minor, 2);
    EXPECT_EQ(pd_->Header.Version.Minor, 2);
    EXPECT_EQ(pd_->Header.ObjectType, NdkObjectTypePd);
}

TEST_P(AdapterInfoTest, AI_11_NoExtensionInterfaces) {
    GUID id{0x12345678, 1, 2, {3, 4, 5, 6, 7, 8, 9, 10}};
    NDK_EXTENSION_INTERFACE out{};
    EXPECT_EQ(adapter_->Dispatch->NdkQueryExtension(&adapter_->Header, &id, NDK_VERSION{1, 0}, &out),
              STATUS_NOT_SUPPORTED);
    EXPECT_EQ(pd_->Dispatch->NdkQueryExtension(&pd_->Header, &id, NDK_VERSION{1, 0}, &out), STATUS_NOT_SUPPORTED);
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(mr->Dispatch->NdkQueryExtension(&mr->Header, &id, NDK_VERSION{1, 0}, &out), STATUS_NOT_SUPPORTED);
    EXPECT_EQ(mr->Dispatch->NdkQueryExtension(&mr->Header, nullptr, NDK_VERSION{1, 0}, &out), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(mr->Dispatch->NdkQueryExtension(nullptr, &id, NDK_VERSION{1, 0}, &out), STATUS_INVALID_PARAMETER);
    Close(&mr->Header);
}

class AdapterLimitTest : public AdapterTest {
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Limits.MaxRegistrationSize = 16 * PAGE_SIZE;
        config.Limits.MaxWindowSize = 16 * PAGE_SIZE;
        config.Limits.FRMRPageCount = 16;
    }
};
SOFTNDK_ALL_MODES(AdapterLimitTest);

TEST_P(AdapterLimitTest, MR_17_LengthAboveMaxRegistrationSizeFails) {
    EXPECT_EQ(Info().MaxRegistrationSize, 16 * PAGE_SIZE);
    LockedBuffer buffer(17);
    Completion done;
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(Register(mr, buffer.mdl(), 16 * PAGE_SIZE + 1, 0), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(Register(mr, buffer.mdl(), 16 * PAGE_SIZE, 0), STATUS_SUCCESS);
    NDK_MR* fast = CreateMr(true);
    EXPECT_EQ(InitializeFast(fast, 17, FALSE), STATUS_IMPLEMENTATION_LIMIT) << "FR-03 follows the override";
    EXPECT_EQ(InitializeFast(fast, 16, FALSE), STATUS_SUCCESS);
    Close(&mr->Header);
    Close(&fast->Header);
}

// ---- open / close ----
TEST(AdapterOpenTest, AI_08_VersionNegotiation) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    NDK_ADAPTER* adapter = nullptr;
    config.RequestedVersion = NDK_VERSION{1, 0};
    ASSERT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_SUCCESS);
    EXPECT_EQ(adapter->Header.Version.Minor, 2) << "the provider's highest minor is reported";
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
    config.RequestedVersion = NDK_VERSION{1, 3};
    EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), NDIS_STATUS_BAD_VERSION);
    // Spec decision "NDK 2.x": 2.0 and 2.1 open and report 2.1, in the adapter info and every header.
    for (USHORT minor : {USHORT{0}, USHORT{1}}) {
        config.RequestedVersion = NDK_VERSION{2, minor};
        ASSERT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_SUCCESS) << "2." << minor;
        EXPECT_EQ(adapter->Header.Version.Major, 2);
        EXPECT_EQ(adapter->Header.Version.Minor, 1);
        NDK_ADAPTER_INFO info{};
        ULONG size = sizeof(info);
        EXPECT_EQ(adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size), STATUS_SUCCESS);
        EXPECT_EQ(size, sizeof(NDK_ADAPTER_INFO));
        EXPECT_EQ(info.Version.Major, 2);
        EXPECT_EQ(info.Version.Minor, 1);
        EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
    }
    config.RequestedVersion = NDK_VERSION{2, 2};
    EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), NDIS_STATUS_BAD_VERSION);
    config.RequestedVersion = NDK_VERSION{3, 0};
    EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), NDIS_STATUS_BAD_VERSION);
    config.RequestedVersion = NDK_VERSION{0, 9};
    EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), NDIS_STATUS_BAD_VERSION);
}

TEST(AdapterOpenTest, AI_09_NullConfigMeansDefaults) {
    NDK_ADAPTER* adapter = nullptr;
    ASSERT_EQ(SoftNdkOpenAdapter(nullptr, &adapter), STATUS_SUCCESS);
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
    EXPECT_EQ(SoftNdkOpenAdapter(nullptr, nullptr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(SoftNdkCloseAdapter(nullptr), STATUS_INVALID_PARAMETER);
    SoftNdkInitAdapterConfig(nullptr);  // no crash
}

TEST(AdapterOpenTest, AI_09_BadConfigsAreRefusedWithAClearStatus) {
    struct Case {
        const char* what;
        void (*edit)(SOFTNDK_ADAPTER_CONFIG&);
        NTSTATUS status;
    };
    const Case cases[] = {
        {"size", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Size = 8; }, STATUS_INVALID_PARAMETER},
        {"version", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Version = 99; }, STATUS_INVALID_PARAMETER},
        {"mode", [](SOFTNDK_ADAPTER_CONFIG& c) { c.CompletionMode = 7; }, STATUS_INVALID_PARAMETER},
        {"flags", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Limits.AdapterFlags |= NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED; },
         STATUS_NOT_SUPPORTED},
        {"frmr<16", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Limits.FRMRPageCount = 15; }, STATUS_INVALID_PARAMETER},
        {"maxreg>lockable", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Limits.MaxRegistrationSize += PAGE_SIZE; },
         STATUS_INVALID_PARAMETER},
        {"maxreg 0", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Limits.MaxRegistrationSize = 0; }, STATUS_INVALID_PARAMETER},
        {"window>reg", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Limits.MaxWindowSize = c.Limits.MaxRegistrationSize + 1; },
         STATUS_INVALID_PARAMETER},
        {"cq depth", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Limits.MaxCqDepth *= 2; }, STATUS_INVALID_PARAMETER},
        {"sge 0", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Limits.MaxInitiatorRequestSge = 0; }, STATUS_INVALID_PARAMETER},
        {"no address", [](SOFTNDK_ADAPTER_CONFIG& c) { c.LocalAddressCount = 0; }, STATUS_INVALID_PARAMETER},
        {"bad family", [](SOFTNDK_ADAPTER_CONFIG& c) { c.LocalAddresses[0].si_family = AF_UNIX; },
         STATUS_INVALID_PARAMETER},
        {"fault name",
         [](SOFTNDK_ADAPTER_CONFIG& c) {
             c.FaultRuleCount = 1;
             c.FaultRules[0] = SOFTNDK_FAULT_RULE{"NdkNoSuchCall", 1, 0, 0, FALSE, STATUS_INSUFFICIENT_RESOURCES};
         },
         STATUS_INVALID_PARAMETER},
        {"fault success status",
         [](SOFTNDK_ADAPTER_CONFIG& c) {
             c.FaultRuleCount = 1;
             c.FaultRules[0] = SOFTNDK_FAULT_RULE{"NdkRegisterMr", 1, 0, 0, FALSE, STATUS_SUCCESS};
         },
         STATUS_INVALID_PARAMETER},
        {"fault async on sync call",
         [](SOFTNDK_ADAPTER_CONFIG& c) {
             c.FaultRuleCount = 1;
             c.FaultRules[0] = SOFTNDK_FAULT_RULE{"NdkQueryAdapterInfo", 1, 0, 0, TRUE, STATUS_UNSUCCESSFUL};
         },
         STATUS_INVALID_PARAMETER},
        {"fault probability",
         [](SOFTNDK_ADAPTER_CONFIG& c) {
             c.FaultRuleCount = 1;
             c.FaultRules[0] = SOFTNDK_FAULT_RULE{"NdkRegisterMr", 0, 1.5, 0, FALSE, STATUS_UNSUCCESSFUL};
         },
         STATUS_INVALID_PARAMETER},
        {"too many rules", [](SOFTNDK_ADAPTER_CONFIG& c) { c.FaultRuleCount = SOFTNDK_MAX_FAULT_RULES + 1; },
         STATUS_INVALID_PARAMETER},
        {"transport", [](SOFTNDK_ADAPTER_CONFIG& c) { c.Transport = SOFTNDK_TRANSPORT_TCP + 1; },
         STATUS_INVALID_PARAMETER},
        {"mpa crc", [](SOFTNDK_ADAPTER_CONFIG& c) { c.MpaCrc = 2; }, STATUS_INVALID_PARAMETER},
        {"mpa rtr", [](SOFTNDK_ADAPTER_CONFIG& c) { c.MpaRtr = 2; }, STATUS_INVALID_PARAMETER},
        {"rtr kicks", [](SOFTNDK_ADAPTER_CONFIG& c) { c.RtrKicks = 2; }, STATUS_INVALID_PARAMETER},
        {"mpa request timeout", [](SOFTNDK_ADAPTER_CONFIG& c) { c.MpaRequestTimeoutMs = 3600001; },
         STATUS_INVALID_PARAMETER},
        {"max half open", [](SOFTNDK_ADAPTER_CONFIG& c) { c.MaxHalfOpen = 65537; }, STATUS_INVALID_PARAMETER},
        {"accept retry zero", [](SOFTNDK_ADAPTER_CONFIG& c) { c.AcceptRetryMs = 0; }, STATUS_INVALID_PARAMETER},
        {"accept retry long", [](SOFTNDK_ADAPTER_CONFIG& c) { c.AcceptRetryMs = 60001; }, STATUS_INVALID_PARAMETER},
        {"disconnect timeout zero", [](SOFTNDK_ADAPTER_CONFIG& c) { c.DisconnectTimeoutMs = 0; },
         STATUS_INVALID_PARAMETER},
        {"disconnect timeout long", [](SOFTNDK_ADAPTER_CONFIG& c) { c.DisconnectTimeoutMs = 3600001; },
         STATUS_INVALID_PARAMETER},
        {"peer stall timeout zero", [](SOFTNDK_ADAPTER_CONFIG& c) { c.PeerStallTimeoutMs = 0; },
         STATUS_INVALID_PARAMETER},
        {"peer stall timeout long", [](SOFTNDK_ADAPTER_CONFIG& c) { c.PeerStallTimeoutMs = 3600001; },
         STATUS_INVALID_PARAMETER},
        {"rotate fast-register keys 2", [](SOFTNDK_ADAPTER_CONFIG& c) { c.RotateFastRegisterKeys = 2; },
         STATUS_INVALID_PARAMETER},
        {"host addresses 2", [](SOFTNDK_ADAPTER_CONFIG& c) { c.HostAddresses = 2; }, STATUS_INVALID_PARAMETER},
        {"defer backstop long", [](SOFTNDK_ADAPTER_CONFIG& c) { c.DeferBackstopMs = 60001; }, STATUS_INVALID_PARAMETER},
        {"accept timeout long", [](SOFTNDK_ADAPTER_CONFIG& c) { c.AcceptTimeoutMs = 3600001; },
         STATUS_INVALID_PARAMETER},
        {"interface name unterminated",
         [](SOFTNDK_ADAPTER_CONFIG& c) { std::memset(c.InterfaceName, 'x', sizeof(c.InterfaceName)); },
         STATUS_INVALID_PARAMETER},
        {"no such interface",
         [](SOFTNDK_ADAPTER_CONFIG& c) { std::snprintf(c.InterfaceName, sizeof(c.InterfaceName), "nosuchif9"); },
         STATUS_NOT_FOUND},
        {"no such interface index", [](SOFTNDK_ADAPTER_CONFIG& c) { c.InterfaceIndex = 0x7FFFFFF0; }, STATUS_NOT_FOUND},
    };
    for (const Case& c : cases) {
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);
        c.edit(config);
        NDK_ADAPTER* adapter = nullptr;
        EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), c.status) << c.what;
        EXPECT_EQ(adapter, nullptr) << c.what;
        EXPECT_STRNE(SoftNdkGetLastErrorText(), "") << c.what;
    }
}

// A numeric setting from the environment that is not a whole number below 2^32 - 1 is refused with the variable's
// name; before, "abc" read as 0, which for SOFTNDK_ACCEPT_TIMEOUT_MS means "wait for ever".
TEST(AdapterOpenTest, AI_09_ANumericEnvironmentSettingThatIsNotAWholeNumberIsRefused) {
    struct Case {
        const char* value;
        NTSTATUS status;
        ULONG read_as;
    };
    const Case cases[] = {{"5000", STATUS_SUCCESS, 5000},
                          {"0", STATUS_SUCCESS, 0},
                          {"abc", STATUS_INVALID_PARAMETER, 0xFFFFFFFFu},
                          {"", STATUS_INVALID_PARAMETER, 0xFFFFFFFFu},
                          {"-1", STATUS_INVALID_PARAMETER, 0xFFFFFFFFu},
                          {"5000ms", STATUS_INVALID_PARAMETER, 0xFFFFFFFFu},
                          {"4294967296", STATUS_INVALID_PARAMETER, 0xFFFFFFFFu},
                          {"99999999999999999999999", STATUS_INVALID_PARAMETER, 0xFFFFFFFFu}};
    for (const Case& c : cases) {
        ASSERT_EQ(setenv("SOFTNDK_ACCEPT_TIMEOUT_MS", c.value, 1), 0);
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);
        EXPECT_EQ(config.AcceptTimeoutMs, c.read_as) << c.value;
        NDK_ADAPTER* adapter = nullptr;
        EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), c.status) << c.value;
        if (adapter != nullptr) {
            EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
        }
        if (c.status != STATUS_SUCCESS) {
            const std::string why = SoftNdkGetLastErrorText();
            EXPECT_NE(why.find("SOFTNDK_ACCEPT_TIMEOUT_MS"), std::string::npos) << why;
        }
    }
    unsetenv("SOFTNDK_ACCEPT_TIMEOUT_MS");
}

TEST(AdapterOpenTest, LIFE_19_SeveralAdaptersAreIndependent) {
    NDK_ADAPTER* a = nullptr;
    NDK_ADAPTER* b = nullptr;
    ASSERT_EQ(SoftNdkOpenAdapter(nullptr, &a), STATUS_SUCCESS);
    ASSERT_EQ(SoftNdkOpenAdapter(nullptr, &b), STATUS_SUCCESS);
    EXPECT_NE(a, b);
    EXPECT_EQ(SoftNdkCloseAdapter(a), STATUS_SUCCESS);
    NDK_ADAPTER_INFO info{};
    ULONG size = sizeof(info);
    EXPECT_EQ(b->Dispatch->NdkQueryAdapterInfo(b, &info, &size), STATUS_SUCCESS);
    EXPECT_EQ(SoftNdkCloseAdapter(b), STATUS_SUCCESS);
}

// Issue 7 §4: an adapter bound to an interface (by name or index) owns exactly that interface's addresses.
TEST(AdapterOpenTest, CM_14_AdapterBoundToAnInterfaceOwnsItsAddresses) {
    for (bool by_index : {false, true}) {
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);
        config.LocalAddressCount = 1;  // replaced by the interface's
        config.LocalAddresses[0].Ipv4.sin_addr.s_addr = htonl(0x0A000001);
        if (by_index)
            config.InterfaceIndex = if_nametoindex("lo");
        else
            std::snprintf(config.InterfaceName, sizeof(config.InterfaceName), "lo");
        NDK_ADAPTER* adapter = nullptr;
        ASSERT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_SUCCESS) << SoftNdkGetLastErrorText();
        auto* object = api::FromHandle<api::AdapterObject>(adapter);
        cm::Endpoint loopback, other;
        SOCKADDR_IN address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(cm::EndpointFromSockaddr(reinterpret_cast<SOCKADDR*>(&address), sizeof(address), &loopback),
                  STATUS_SUCCESS);
        address.sin_addr.s_addr = htonl(0x0A000001);
        ASSERT_EQ(cm::EndpointFromSockaddr(reinterpret_cast<SOCKADDR*>(&address), sizeof(address), &other),
                  STATUS_SUCCESS);
        EXPECT_TRUE(api::AdapterOwnsAddress(*object, loopback, false)) << "lo has 127.0.0.1";
        EXPECT_FALSE(api::AdapterOwnsAddress(*object, other, false)) << "the configured list was replaced";
        EXPECT_EQ(object->interface_name, "lo");
        SOFTNDK_ADAPTER_DETAILS details{};
        details.Size = sizeof(details);
        ASSERT_EQ(SoftNdkQueryAdapterDetails(adapter, &details), STATUS_SUCCESS);
        EXPECT_STREQ(details.InterfaceName, "lo");
        EXPECT_EQ(details.InterfaceIndex, if_nametoindex("lo"));
        ASSERT_GE(details.LocalAddressCount, 1u);
        bool has_loopback = false;
        for (ULONG i = 0; i < details.LocalAddressCount; ++i)
            has_loopback |= details.LocalAddresses[i].si_family == AF_INET &&
                            details.LocalAddresses[i].Ipv4.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
        EXPECT_TRUE(has_loopback) << "the interface's addresses, not the configured 10.0.0.1";
        EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
    }
}

// Issue 7 §7: what ndkinfo prints comes from the open adapter (the addresses it serves, the host's included);
// bad arguments change nothing.
TEST(AdapterOpenTest, CM_14_AdapterDetailsNameTheTransportAndRefuseBadArguments) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    config.Transport = SOFTNDK_TRANSPORT_TCP;
    config.MpaCrc = 1;
    config.MpaRtr = SOFTNDK_MPA_RTR_READ;
    config.BusyPollMicroseconds = 7;
    NDK_ADAPTER* adapter = nullptr;
    ASSERT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_SUCCESS);
    SOFTNDK_ADAPTER_DETAILS details{};
    details.Size = sizeof(details);
    ASSERT_EQ(SoftNdkQueryAdapterDetails(adapter, &details), STATUS_SUCCESS);
    EXPECT_EQ(details.Transport, static_cast<ULONG>(SOFTNDK_TRANSPORT_TCP));
    EXPECT_EQ(details.MpaCrc, 1u);
    EXPECT_EQ(details.MpaRtr, static_cast<ULONG>(SOFTNDK_MPA_RTR_READ));
    EXPECT_EQ(details.BusyPollMicroseconds, 7u);
    EXPECT_STREQ(details.InterfaceName, "");
    // What the adapter serves: the configured addresses first, then (HostAddresses, the default) the host's own.
    ASSERT_GE(details.LocalAddressCount, config.LocalAddressCount);
    for (ULONG i = 0; i < config.LocalAddressCount; ++i)
        EXPECT_EQ(details.LocalAddresses[i].si_family, config.LocalAddresses[i].si_family) << i;
    {
        SOFTNDK_ADAPTER_CONFIG own_only = config;
        own_only.HostAddresses = 0;
        NDK_ADAPTER* configured = nullptr;
        ASSERT_EQ(SoftNdkOpenAdapter(&own_only, &configured), STATUS_SUCCESS);
        SOFTNDK_ADAPTER_DETAILS only{};
        only.Size = sizeof(only);
        ASSERT_EQ(SoftNdkQueryAdapterDetails(configured, &only), STATUS_SUCCESS);
        EXPECT_EQ(only.LocalAddressCount, config.LocalAddressCount) << "HostAddresses 0: only what was configured";
        EXPECT_EQ(SoftNdkCloseAdapter(configured), STATUS_SUCCESS);
    }
    SOFTNDK_ADAPTER_DETAILS wrong{};
    wrong.Size = sizeof(wrong) - 1;
    EXPECT_EQ(SoftNdkQueryAdapterDetails(adapter, &wrong), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(wrong.Transport, 0u) << "unchanged";
    EXPECT_EQ(SoftNdkQueryAdapterDetails(adapter, nullptr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(SoftNdkQueryAdapterDetails(nullptr, &details), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

// CQ-14: a completion's ProviderErrorCode explained for a log, and the refusals of bad arguments.
TEST(ProviderErrorTextTest, CQ_14_ProviderErrorCodeNamesTheTerminateCause) {
    char text[128];
    ASSERT_EQ(SoftNdkFormatProviderError(softndk::engine::TerminateProviderError(1, 1, 0x00), text, sizeof(text)),
              STATUS_SUCCESS);
    EXPECT_STREQ(text, "DDP/0x1/0x00 (DDP tagged buffer: invalid STag)");
    ASSERT_EQ(SoftNdkFormatProviderError(softndk::engine::TerminateProviderError(0, 1, 0x01), text, sizeof(text)),
              STATUS_SUCCESS);
    EXPECT_STREQ(text, "RDMAP/0x1/0x01 (RDMAP remote protection: base or bounds violation)");
    ASSERT_EQ(SoftNdkFormatProviderError(0, text, sizeof(text)), STATUS_SUCCESS);
    EXPECT_STREQ(text, "none");
    ASSERT_EQ(SoftNdkFormatProviderError(0x7, text, sizeof(text)), STATUS_SUCCESS);
    EXPECT_STREQ(text, "provider error 0x7 (not a terminate cause)");
    ASSERT_EQ(SoftNdkFormatProviderError(0x1F000, text, sizeof(text)), STATUS_SUCCESS) << "layer 15 is no layer";
    EXPECT_STREQ(text, "provider error 0x1f000 (not a terminate cause)");
    char small[8];
    EXPECT_EQ(SoftNdkFormatProviderError(softndk::engine::TerminateProviderError(1, 1, 0), small, sizeof(small)),
              STATUS_BUFFER_OVERFLOW);
    EXPECT_STREQ(small, "DDP/0x1") << "cut to fit, NUL-terminated";
    std::memset(small, 'x', sizeof(small));
    EXPECT_EQ(SoftNdkFormatProviderError(0, small, 0), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(small[0], 'x') << "unchanged";
    EXPECT_EQ(SoftNdkFormatProviderError(0, nullptr, 8), STATUS_INVALID_PARAMETER);
}

// Issue 20 §1: consumers print the names the tools print.
TEST(StatusNameTest, ISSUE_20_StatusNameNamesEveryStatusSoftndkDefines) {
    EXPECT_STREQ(SoftNdkStatusName(STATUS_CONNECTION_REFUSED), "STATUS_CONNECTION_REFUSED");
    EXPECT_STREQ(SoftNdkStatusName(STATUS_SUCCESS), "STATUS_SUCCESS");
    EXPECT_STREQ(SoftNdkStatusName(STATUS_PENDING), "STATUS_PENDING");
    EXPECT_STREQ(SoftNdkStatusName(STATUS_INVALID_PARAMETER_MIX), "STATUS_INVALID_PARAMETER_MIX");
    EXPECT_STREQ(SoftNdkStatusName(STATUS_BUFFER_OVERFLOW), "STATUS_BUFFER_OVERFLOW");
    EXPECT_STREQ(SoftNdkStatusName(STATUS_SHARING_VIOLATION), "STATUS_SHARING_VIOLATION");
    EXPECT_STREQ(SoftNdkStatusName(static_cast<NTSTATUS>(0xC0000016)), "STATUS_MORE_PROCESSING_REQUIRED");
    EXPECT_EQ(SoftNdkStatusName(static_cast<NTSTATUS>(0xC0DEC0DE)), nullptr);  // not one of ours: no guess
}

// Issue 20 §1 (CM-04, CM-14): the default adapter owns every address of the host, so a connect from the route's
// source works without SOFTNDK_INTERFACE; HostAddresses = 0 keeps it to LocalAddresses, and the refusal says what
// it owns.
TEST(AdapterOpenTest, CM_14_DefaultAdapterOwnsTheHostsAddresses) {
    ifaddrs* list = nullptr;
    ASSERT_EQ(getifaddrs(&list), 0);
    in_addr host{};
    bool found = false;
    for (ifaddrs* entry = list; entry != nullptr && !found; entry = entry->ifa_next) {
        if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
        host = reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr;
        found = (ntohl(host.s_addr) >> 24) != 127;
    }
    freeifaddrs(list);
    if (!found) GTEST_SKIP() << "this host has no IPv4 address besides loopback";
    for (ULONG host_addresses : {1u, 0u}) {
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);
        config.InterfaceName[0] = 0;  // whatever SOFTNDK_INTERFACE says
        config.HostAddresses = host_addresses;
        NDK_ADAPTER* adapter = nullptr;
        ASSERT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_SUCCESS) << SoftNdkGetLastErrorText();
        auto* object = api::FromHandle<api::AdapterObject>(adapter);
        SOCKADDR_IN address{};
        address.sin_family = AF_INET;
        std::memcpy(&address.sin_addr, &host, sizeof(host));
        cm::Endpoint mine, elsewhere;
        ASSERT_EQ(cm::EndpointFromSockaddr(reinterpret_cast<SOCKADDR*>(&address), sizeof(address), &mine),
                  STATUS_SUCCESS);
        address.sin_addr.s_addr = htonl(0xCB0071FE);  // 203.0.113.254 (TEST-NET-3), checked below
        ASSERT_FALSE(api::HostHasAddress(AF_INET, reinterpret_cast<const uint8_t*>(&address.sin_addr)));
        ASSERT_EQ(cm::EndpointFromSockaddr(reinterpret_cast<SOCKADDR*>(&address), sizeof(address), &elsewhere),
                  STATUS_SUCCESS);
        EXPECT_EQ(api::AdapterOwnsAddress(*object, mine, false), host_addresses == 1);
        EXPECT_FALSE(api::AdapterOwnsAddress(*object, elsewhere, false));
        const std::string owned = api::DescribeOwnedAddresses(*object);
        EXPECT_NE(owned.find("127.0.0.1"), std::string::npos) << owned;
        EXPECT_EQ(owned.find("every address of this host") != std::string::npos, host_addresses == 1) << owned;
        EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
    }
}

// Issue 19 §3 (LIFE-15): a close that waits names each object it waits for, with the call that made it and its
// state (before: "1 objects of this adapter are open").
TEST(AdapterOpenTest, LIFE_15_ACloseThatWaitsNamesWhatItWaitsFor) {
    NDK_ADAPTER* adapter = nullptr;
    ASSERT_EQ(SoftNdkOpenAdapter(nullptr, &adapter), STATUS_SUCCESS);
    NDK_PD* pd = nullptr;
    NDK_CONNECTOR* connector = nullptr;
    auto created = [](PVOID, NTSTATUS, NDK_OBJECT_HEADER*) {};
    ASSERT_EQ(adapter->Dispatch->NdkCreatePd(adapter, created, nullptr, &pd), STATUS_SUCCESS);
    ASSERT_EQ(adapter->Dispatch->NdkCreateConnector(adapter, created, nullptr, &connector), STATUS_SUCCESS);
    testing::internal::CaptureStderr();
    std::atomic<NTSTATUS> closed{STATUS_PENDING};
    std::thread closer([&] { closed = SoftNdkCloseAdapter(adapter); });
    std::this_thread::sleep_for(std::chrono::milliseconds(2600));
    const std::string said = testing::internal::GetCapturedStderr();
    EXPECT_EQ(closed.load(), STATUS_PENDING) << "LIFE-15: the close waits for the open objects";
    EXPECT_NE(said.find("still waiting (LIFE-15)"), std::string::npos) << said;
    EXPECT_NE(said.find("connector (NdkCreateConnector"), std::string::npos) << said;
    EXPECT_NE(said.find("PD (NdkCreatePd)"), std::string::npos) << said;
    EXPECT_NE(said.find("open, never closed"), std::string::npos) << said;
    EXPECT_EQ(connector->Dispatch->NdkCloseConnector(&connector->Header, nullptr, nullptr), STATUS_SUCCESS);
    EXPECT_EQ(pd->Dispatch->NdkClosePd(&pd->Header, nullptr, nullptr), STATUS_SUCCESS);
    closer.join();
    EXPECT_EQ(closed.load(), STATUS_SUCCESS);
}

}  // namespace
}  // namespace softndk::test
