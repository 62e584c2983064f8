// NDK_ADAPTER_DISPATCH and the adapter open/close entry points (AMB-12).
#include <net/if.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <new>

#include "api/adapter_config.h"
#include "api/async_request.h"
#include "mem/mdl_chain.h"

namespace softndk::api {
namespace {

using engine::ProviderFunction;

// ---- adapter lifetime: the adapter is destroyed by SoftNdkCloseAdapter, not by its last release ----
void AdapterReleased(void* object) {
    auto* adapter = static_cast<AdapterObject*>(object);
    std::lock_guard lock(adapter->closed_mutex);
    adapter->released = true;
    adapter->closed_cv.notify_all();
}
constexpr Lifetime::Ops kAdapterOps{nullptr, &AdapterReleased};

// ---- PD ----
bool PdTeardown(void* object) {
    auto* pd = static_cast<PdObject*>(object);
    // No child is left, so no work holds the privileged token.
    if (pd->privileged_slot != 0 && pd->adapter->tokens.Retire(pd->privileged_slot, nullptr, nullptr))
        pd->adapter->tokens.Free(pd->privileged_slot);
    return true;
}
constexpr Lifetime::Ops kPdOps{&PdTeardown, &DestroyObject<PdObject>};

NTSTATUS MakePd(AdapterObject* adapter, NDK_OBJECT_HEADER** out) {
    auto* pd = new (std::nothrow) PdObject(adapter, kPdOps);
    if (pd == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
    // LAM-14/15/17: the privileged token reads and writes LAM pages locally, never remotely.
    pd->privileged_target.kind = mem::TargetKind::kPrivileged;
    pd->privileged_target.owner = pd;
    pd->privileged_target.rights = mem::kRightLocalRead | mem::kRightLocalWrite;
    if (adapter->info.AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED)
        pd->privileged_target.rights |= mem::kRightReadSink;
    pd->privileged_target.logical = &adapter->logical;
    NTSTATUS status = adapter->tokens.Reserve(&pd->privileged_slot);
    if (!NT_SUCCESS(status)) {
        pd->privileged_slot = 0;
        pd->lifetime.Close(nullptr, nullptr);
        return status;
    }
    pd->privileged_tokens = adapter->tokens.Publish(pd->privileged_slot, &pd->privileged_target);
    InitializeHandle(pd->ndk, NdkObjectTypePd, adapter->info.Version, &kPdDispatch);
    *out = &pd->ndk.Header;
    return STATUS_SUCCESS;
}

// ---- dispatch functions ----
NTSTATUS QueryAdapterInfo(NDK_ADAPTER* handle, NDK_ADAPTER_INFO* info, ULONG* size) {
    AdapterObject* adapter = FromHandle<AdapterObject>(handle);
    if (adapter == nullptr || size == nullptr)
        return InvalidParameter("NdkQueryAdapterInfo: NULL adapter or pBufferSize");
    VerifierPassiveEntry("NdkQueryAdapterInfo");  // CB-09: PASSIVE_LEVEL only
    engine::FaultDecision fault = adapter->faults.Check(ProviderFunction::NdkQueryAdapterInfo);
    if (fault.kind != engine::FaultDecision::Kind::kNone) return fault.status;
    if (*size < sizeof(NDK_ADAPTER_INFO)) {  // AI-01
        *size = sizeof(NDK_ADAPTER_INFO);
        return STATUS_BUFFER_TOO_SMALL;
    }
    if (info == nullptr) return InvalidParameter("NdkQueryAdapterInfo: NULL pInfo");
    *info = adapter->info;
    *size = sizeof(NDK_ADAPTER_INFO);
    return STATUS_SUCCESS;
}

NTSTATUS CreatePd(NDK_ADAPTER* handle, NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_PD** out) {
    AdapterObject* adapter = FromHandle<AdapterObject>(handle);
    if (adapter == nullptr || completion == nullptr || out == nullptr)
        return InvalidParameter("NdkCreatePd: NULL adapter, CreateCompletion or ppNdkPd");
    return RunCreate(*adapter, ProviderFunction::NdkCreatePd, adapter->lifetime, completion, context, out,
                     [adapter](NDK_OBJECT_HEADER** header) { return MakePd(adapter, header); });
}

// LAM-01 … LAM-11. The LAM's AdapterContext is the mapping record.
NTSTATUS BuildLam(NDK_ADAPTER* handle, MDL* mdl, SIZE_T length, NDK_FN_REQUEST_COMPLETION completion, PVOID context,
                  NDK_LOGICAL_ADDRESS_MAPPING* lam, ULONG* lam_size, ULONG* fbo) {
    AdapterObject* adapter = FromHandle<AdapterObject>(handle);
    if (adapter == nullptr || mdl == nullptr || completion == nullptr || lam_size == nullptr || fbo == nullptr)
        return InvalidParameter("NdkBuildLam: NULL adapter, Mdl, RequestCompletion (AMB-21), pLAMSize or pFBO");
    if (length == 0) return InvalidParameter("NdkBuildLam: Length is 0");
    if (length > adapter->info.MaxRegistrationSize)
        return InvalidParameter("NdkBuildLam: Length exceeds MaxRegistrationSize");
    const ULONG pages = ADDRESS_AND_SIZE_TO_SPAN_PAGES(MmGetMdlVirtualAddress(mdl), length);
    const ULONG needed = NDK_LAM_SIZE(pages);
    if (*lam_size < needed || lam == nullptr) {  // LAM-06, checked before any mapping is built
        *lam_size = needed;
        return STATUS_BUFFER_TOO_SMALL;
    }
    return RunRequest(*adapter, ProviderFunction::NdkBuildLam, adapter->lifetime, completion, context,
                      [adapter, mdl, length, lam, lam_size, fbo](const Finish&) -> NTSTATUS {
                          std::vector<uint8_t*> host_pages;
                          mem::ResolvedChain chain;
                          NTSTATUS status = mem::ResolveMdlChain(mdl, length, host_pages, chain);
                          if (!NT_SUCCESS(status)) return status;
                          mem::LogicalAddressSpace::Mapping* mapping = nullptr;
                          status = adapter->logical.Map(host_pages.data(), host_pages.size(), &mapping);
                          if (!NT_SUCCESS(status)) return status;  // LAM-08: Map leaves nothing behind
                          lam->AdapterContext = mapping;
                          lam->AdapterPageCount = mapping->page_count;
                          for (uint32_t i = 0; i < mapping->page_count; ++i)
                              lam->AdapterPageArray[i].QuadPart =
                                  static_cast<LONGLONG>(mem::LogicalAddressSpace::LogicalAddress(*mapping, i));
                          *lam_size = NDK_LAM_SIZE(mapping->page_count);
                          *fbo = chain.first_byte_offset;
                          return STATUS_SUCCESS;
                      });
}

VOID ReleaseLam(NDK_ADAPTER* handle, NDK_LOGICAL_ADDRESS_MAPPING* lam) {
    AdapterObject* adapter = FromHandle<AdapterObject>(handle);
    if (adapter == nullptr || lam == nullptr) {
        SetLastErrorText("NdkReleaseLam: NULL adapter or LAM");
        return;
    }
    auto* mapping = static_cast<mem::LogicalAddressSpace::Mapping*>(lam->AdapterContext);
    if (!adapter->logical.Unmap(mapping)) {
        SetLastErrorText("NdkReleaseLam: not a live LAM of this adapter (AdapterContext modified? LAM-10)");
        return;
    }
    lam->AdapterContext = nullptr;  // LAM-11: the MDL is untouched
}

}  // namespace

NTSTATUS QueryExtensionInterface(NDK_OBJECT_HEADER* object, GUID* id, NDK_VERSION, NDK_EXTENSION_INTERFACE* out) {
    if (object == nullptr || id == nullptr || out == nullptr)
        return InvalidParameter("NdkQueryExtensionInterface: NULL object, interface id or output");
    SetLastErrorText("NdkQueryExtensionInterface: no extension interfaces are defined (AI-11)");
    return STATUS_NOT_SUPPORTED;
}

const NDK_ADAPTER_DISPATCH kAdapterDispatch = {
    &QueryExtensionInterface, &QueryAdapterInfo, &CreateCq, &CreatePd,   &CreateSharedEndpoint,
    &CreateConnector,         &CreateListener,   &BuildLam, &ReleaseLam,
};

}  // namespace softndk::api

using softndk::api::AdapterObject;

extern "C" NTSTATUS SoftNdkOpenAdapter(const SOFTNDK_ADAPTER_CONFIG* Config, NDK_ADAPTER** ppNdkAdapter) {
    if (ppNdkAdapter == nullptr) return softndk::api::InvalidParameter("SoftNdkOpenAdapter: NULL ppNdkAdapter");
    SOFTNDK_ADAPTER_CONFIG defaults;
    if (Config == nullptr) {
        SoftNdkInitAdapterConfig(&defaults);
        Config = &defaults;
    }
    NTSTATUS status = softndk::api::ValidateAdapterConfig(*Config);
    if (!NT_SUCCESS(status)) return status;
    auto* adapter = new (std::nothrow) AdapterObject(Config->RandomSeed, softndk::api::kAdapterOps);
    if (adapter == nullptr) return NDIS_STATUS_RESOURCES;
    status = adapter->faults.Configure(Config->FaultRules, Config->FaultRuleCount);
    if (!NT_SUCCESS(status)) {
        delete adapter;
        return status;
    }
    adapter->info = Config->Limits;
    softndk::api::NegotiateVersion(Config->RequestedVersion, &adapter->info.Version);  // AI-08: validated above
    adapter->limits.max_registration_size = adapter->info.MaxRegistrationSize;
    adapter->limits.max_fast_register_pages =
        static_cast<uint32_t>(std::min<uint64_t>(adapter->info.MaxRegistrationSize / PAGE_SIZE, UINT32_MAX));
    adapter->limits.read_sink_required =
        (adapter->info.AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED) == 0;
    adapter->limits.rotate_fast_register_keys = Config->RotateFastRegisterKeys != 0;
    adapter->local_addresses.assign(Config->LocalAddresses, Config->LocalAddresses + Config->LocalAddressCount);
    if (Config->InterfaceName[0] != 0 || Config->InterfaceIndex != 0) {
        // Issue 7 §4: bound to one interface, the adapter owns exactly its addresses.
        status = softndk::api::InterfaceAddresses(Config->InterfaceName, Config->InterfaceIndex,
                                                  &adapter->local_addresses, &adapter->interface_name);
        if (!NT_SUCCESS(status)) {
            delete adapter;
            return status;
        }
    } else {
        adapter->host_addresses = Config->HostAddresses != 0;
    }
    adapter->accept_timeout_ms = Config->AcceptTimeoutMs;
    adapter->deferred_links = Config->Transport == SOFTNDK_TRANSPORT_IN_PROCESS_DEFERRED;
    adapter->transport = Config->Transport;
    adapter->mpa_crc = Config->MpaCrc != 0;
    adapter->mpa_read_rtr = Config->MpaRtr == SOFTNDK_MPA_RTR_READ;
    adapter->rtr_kicks = Config->RtrKicks != 0;
    adapter->mpa_request_timeout_ms = Config->MpaRequestTimeoutMs;
    adapter->max_half_open = Config->MaxHalfOpen;
    adapter->accept_retry_ms = Config->AcceptRetryMs;
    adapter->disconnect_timeout_ms = Config->DisconnectTimeoutMs;
    adapter->peer_stall_timeout_ms = Config->PeerStallTimeoutMs;
    adapter->defer_backstop_ms = Config->DeferBackstopMs;
    adapter->wire_faults.drop_after_bytes = Config->WireFaults.DropAfterBytes;
    adapter->wire_faults.drop_after_fpdus = Config->WireFaults.DropAfterFpdus;
    adapter->wire_faults.corrupt_byte = Config->WireFaults.CorruptByte;
    adapter->wire_faults.stall_after_bytes = Config->WireFaults.StallAfterBytes;
    adapter->wire_faults.delay_us = Config->WireFaults.DelayMicroseconds;
    if (Config->TracePath[0] != 0) {
        status = softndk::transport::WireTrace::Open(Config->TracePath, &adapter->trace);
        if (!NT_SUCCESS(status)) {
            softndk::SetLastErrorText("SoftNdkOpenAdapter: the trace file \"%s\" cannot be written (0x%08X)",
                                      Config->TracePath, static_cast<unsigned>(status));
            delete adapter;
            return status;
        }
    }
    adapter->executor = std::make_unique<softndk::engine::CompletionExecutor>(
        static_cast<SOFTNDK_COMPLETION_MODE>(Config->CompletionMode), Config->RandomSeed);
    adapter->progress = std::make_unique<softndk::engine::ProgressEngine>(
        softndk::engine::ProgressEngine::Options{Config->ProgressThreads, Config->BusyPollMicroseconds});
    if (!adapter->progress->ok()) {
        softndk::SetLastErrorText("SoftNdkOpenAdapter: no epoll set or progress thread could be made");
        adapter->progress.reset();
        adapter->executor.reset();
        delete adapter;
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    softndk::api::InitializeHandle(adapter->ndk, NdkObjectTypeAdapter, adapter->info.Version,
                                   &softndk::api::kAdapterDispatch);
    *ppNdkAdapter = &adapter->ndk;
    return STATUS_SUCCESS;
}

extern "C" NTSTATUS SoftNdkCloseAdapter(NDK_ADAPTER* pNdkAdapter) {
    AdapterObject* adapter = softndk::api::FromHandle<AdapterObject>(pNdkAdapter);
    if (adapter == nullptr) return softndk::api::InvalidParameter("SoftNdkCloseAdapter: not an open adapter");
    if (adapter->executor->OnExecutorThread())
        return softndk::api::InvalidParameter("SoftNdkCloseAdapter: called from a provider callback (LIFE-15)");
    adapter->lifetime.Close(nullptr, nullptr);
    {
        // LIFE-13/15: blocks until every child is closed and every callback has returned.
        // Issue 19 §3: a wait that lasts names what it waits for, after 2 s and then every 10 s.
        std::unique_lock lock(adapter->closed_mutex);
        auto interval = std::chrono::seconds(2);
        while (!adapter->closed_cv.wait_for(lock, interval, [adapter] { return adapter->released; })) {
            interval = std::chrono::seconds(10);
            const std::string objects = softndk::api::DescribeLiveUnder(&adapter->lifetime, 32);
            std::fprintf(stderr,
                         "softndk: SoftNdkCloseAdapter(%p) still waiting (LIFE-15): it closes when every object of "
                         "the adapter is closed and every callback has returned; still there:\n%s",
                         static_cast<void*>(pNdkAdapter),
                         objects.empty() ? "  (no object: a callback or request of the adapter is still running)\n"
                                         : objects.c_str());
        }
    }
    adapter->progress.reset();  // every object is closed: nothing is queued there any more
    adapter->executor.reset();  // joins the provider thread after its last job
    adapter->magic = 0;
    delete adapter;
    return STATUS_SUCCESS;
}

extern "C" NTSTATUS SoftNdkQueryAdapterDetails(NDK_ADAPTER* pNdkAdapter, SOFTNDK_ADAPTER_DETAILS* Details) {
    AdapterObject* adapter = softndk::api::FromHandle<AdapterObject>(pNdkAdapter);
    if (adapter == nullptr) return softndk::api::InvalidParameter("SoftNdkQueryAdapterDetails: not an open adapter");
    if (Details == nullptr || Details->Size != sizeof(SOFTNDK_ADAPTER_DETAILS))
        return softndk::api::InvalidParameter("SoftNdkQueryAdapterDetails: Details is NULL or its Size is wrong");
    SOFTNDK_ADAPTER_DETAILS details{};
    details.Size = sizeof(details);
    std::snprintf(details.InterfaceName, sizeof(details.InterfaceName), "%s", adapter->interface_name.c_str());
    details.InterfaceIndex = adapter->interface_name.empty() ? 0 : if_nametoindex(adapter->interface_name.c_str());
    details.Transport = adapter->transport;
    details.MpaCrc = adapter->mpa_crc ? 1 : 0;
    details.MpaRtr = adapter->mpa_read_rtr ? SOFTNDK_MPA_RTR_READ : SOFTNDK_MPA_RTR_WRITE;
    details.ProgressThreads = adapter->progress->threads();
    details.BusyPollMicroseconds = adapter->progress->busy_poll_us();
    // What the adapter serves: its configured addresses and, when it owns the host's (HostAddresses, the default
    // without an interface), every address of this host now, each once, as many as the structure holds.
    std::vector<SOCKADDR_INET> served = adapter->local_addresses;
    if (adapter->host_addresses) {
        for (const SOCKADDR_INET& address : softndk::api::HostAddressList()) {
            const bool known = std::any_of(served.begin(), served.end(), [&](const SOCKADDR_INET& other) {
                if (other.si_family != address.si_family) return false;
                return address.si_family == AF_INET
                           ? std::memcmp(&other.Ipv4.sin_addr, &address.Ipv4.sin_addr, 4) == 0
                           : std::memcmp(&other.Ipv6.sin6_addr, &address.Ipv6.sin6_addr, 16) == 0;
            });
            if (!known) served.push_back(address);
        }
    }
    details.LocalAddressCount = static_cast<ULONG>(std::min<size_t>(served.size(), SOFTNDK_MAX_LOCAL_ADDRESSES));
    std::copy_n(served.begin(), details.LocalAddressCount, details.LocalAddresses);
    *Details = details;
    return STATUS_SUCCESS;
}
