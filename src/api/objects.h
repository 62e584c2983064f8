// The C++ objects behind the NDK handles. Each starts with the C struct the consumer sees (docs/architecture.md,
// "Objects and completions"), so a handle is cast back with no lookup; the type and a magic number are checked first.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <softndk/softndk.h>

#include "api/lifetime.h"
#include "api/verifier_hooks.h"
#include "cm/fabric.h"
#include "engine/completion_executor.h"
#include "engine/completion_queue.h"
#include "engine/progress_engine.h"
#include "engine/queue_pair.h"
#include "engine/receive_queue.h"
#include "engine/fault_injector.h"
#include "transport/wire_faults.h"
#include "transport/wire_trace.h"
#include "mem/logical_address_space.h"
#include "mem/memory_region.h"
#include "mem/memory_window.h"
#include "mem/token_table.h"

namespace softndk::api {

struct AdapterObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeAdapter;
    static constexpr uint32_t kMagic = 0x41445054;  // "ADPT"
    NDK_ADAPTER ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    NDK_ADAPTER_INFO info{};
    mem::RegistrationLimits limits{};
    std::vector<SOCKADDR_INET> local_addresses;
    std::string interface_name;      // empty unless bound to one interface
    bool host_addresses = false;     // also owns every address of the host (HostAddresses, issue 20 §1)
    uint32_t accept_timeout_ms = 0;  // CM-08: 0 = none
    bool deferred_links = false;     // SOFTNDK_TRANSPORT_IN_PROCESS_DEFERRED
    uint32_t transport = SOFTNDK_TRANSPORT_AUTO;
    bool mpa_crc = false;                         // ask for CRC32c in MPA (issue 7 §2)
    bool mpa_read_rtr = false;                    // offer a Read RTR instead of a Write RTR (RFC 6581 §6)
    bool rtr_kicks = true;                        // wake a silent responder after the RTR (siw-on-the-wire §3.4)
    uint32_t mpa_request_timeout_ms = 0;          // issue 18 §2: passive MPA Request deadline (0 = none)
    uint32_t max_half_open = 0;                   // per listener (0 = no cap)
    uint32_t accept_retry_ms = 100;               // pause after accept fails for want of resources
    uint32_t disconnect_timeout_ms = 60000;       // CM-25: NdkDisconnect's wait for the peer's FIN
    uint32_t peer_stall_timeout_ms = 60000;       // a peer that stops moving open work is reset
    uint32_t defer_backstop_ms = 10;              // CB-19: a chain left deferred goes this long after (0: never)
    transport::WireFaults wire_faults;            // issue 7 §5
    std::shared_ptr<transport::WireTrace> trace;  // issue 7 §6: null unless tracing
    engine::FaultInjector faults;
    std::unique_ptr<engine::CompletionExecutor> executor;
    std::unique_ptr<engine::ProgressEngine> progress;  // issue 7 §1: deliveries of deferred links, later sockets
    mem::TokenTable tokens;
    mem::LogicalAddressSpace logical;
    std::mutex closed_mutex;
    std::condition_variable closed_cv;
    bool released = false;

    AdapterObject(uint64_t seed, const Lifetime::Ops& ops) : lifetime(ops, this, nullptr), tokens(seed) {}
};

struct PdObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypePd;
    static constexpr uint32_t kMagic = 0x50444F42;  // "PDOB"
    NDK_PD ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    AdapterObject* adapter;
    uint32_t privileged_slot = 0;
    mem::TokenPair privileged_tokens{};
    mem::TokenTarget privileged_target{};

    PdObject(AdapterObject* owner, const Lifetime::Ops& ops) : lifetime(ops, this, &owner->lifetime), adapter(owner) {}
};

struct MrObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeMr;
    static constexpr uint32_t kMagic = 0x4D524F42;  // "MROB"
    NDK_MR ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    PdObject* pd;
    mem::MemoryRegion region;

    MrObject(PdObject* owner, bool fast, const Lifetime::Ops& ops)
        : lifetime(ops, this, &owner->lifetime), pd(owner), region(owner->adapter->tokens, fast, owner) {}
};

struct CqObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeCq;
    static constexpr uint32_t kMagic = 0x43514F42;  // "CQOB"
    NDK_CQ ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    AdapterObject* adapter;
    NDK_FN_CQ_NOTIFICATION_CALLBACK notify;
    PVOID notify_context;
    engine::CompletionQueue queue;

    CqObject(AdapterObject* owner, uint32_t depth, NDK_FN_CQ_NOTIFICATION_CALLBACK callback, PVOID context,
             const Lifetime::Ops& ops);
};

struct SrqObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeSrq;
    static constexpr uint32_t kMagic = 0x53525142;  // "SRQB"
    NDK_SRQ ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    PdObject* pd;
    engine::ReceiveQueue queue;
    NDK_FN_SRQ_NOTIFICATION_CALLBACK notify;
    PVOID notify_context;

    SrqObject(PdObject* owner, uint32_t depth, uint32_t max_sge, const Lifetime::Ops& ops)
        : lifetime(ops, this, &owner->lifetime),
          pd(owner),
          queue(depth, max_sge, owner->adapter->info.MaxTransferLength),
          notify(nullptr),
          notify_context(nullptr) {}
};

struct ConnectorObject;

struct QpObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeQp;
    static constexpr uint32_t kMagic = 0x51504F42;  // "QPOB"
    NDK_QP ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    PdObject* pd;
    CqObject* receive_cq;
    CqObject* initiator_cq;
    SrqObject* srq;
    std::unique_ptr<engine::ReceiveQueue> own_receive_queue;
    engine::QueuePair qp;
    std::atomic<bool> associated{false};  // taken by a connector (CM-28: never reused)

    QpObject(PdObject* owner, CqObject* rcq, CqObject* icq, SrqObject* shared, std::unique_ptr<engine::ReceiveQueue> rq,
             const engine::QueuePair::Params& params, const Lifetime::Ops& ops)
        : lifetime(ops, this, &owner->lifetime),
          pd(owner),
          receive_cq(rcq),
          initiator_cq(icq),
          srq(shared),
          own_receive_queue(std::move(rq)),
          qp(Named(params, this)) {}
    static engine::QueuePair::Params Named(engine::QueuePair::Params params, const QpObject* self) {
        params.handle = &self->ndk;
        return params;
    }
};

struct MwObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeMw;
    static constexpr uint32_t kMagic = 0x4D574F42;  // "MWOB"
    NDK_MW ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    PdObject* pd;
    mem::MemoryWindow window;

    MwObject(PdObject* owner, const Lifetime::Ops& ops)
        : lifetime(ops, this, &owner->lifetime), pd(owner), window(owner->adapter->tokens, owner) {}
};

// Returns the object behind a handle, or nullptr for NULL, a wrong type or a closed/foreign object.
template <class Object, class Handle>
Object* FromHandle(Handle* handle) {
    if (handle == nullptr || !VerifierCheckHandle(handle)) return nullptr;  // LIFE-06: closed handles refused
    auto* header = reinterpret_cast<NDK_OBJECT_HEADER*>(handle);
    if (header->ObjectType != Object::kType) return nullptr;
    auto* object = reinterpret_cast<Object*>(handle);
    return object->magic == Object::kMagic ? object : nullptr;
}

// LIFE-03/04: the header the consumer sees.
template <class Handle, class Dispatch>
void InitializeHandle(Handle& handle, NDK_OBJECT_TYPE type, NDK_VERSION version, const Dispatch* dispatch) {
    handle.Header.Version = version;
    handle.Header.ObjectType = type;
    handle.Header.NdkReserved = NDK_OBJECT_HEADER_RESERVED_BLOCK{};
    handle.Dispatch = dispatch;
    VerifierObjectCreated(&handle, type);
}

// Shared by every dispatch table (AI-11): no extension interfaces exist.
NTSTATUS QueryExtensionInterface(NDK_OBJECT_HEADER* object, GUID* id, NDK_VERSION version,
                                 NDK_EXTENSION_INTERFACE* out);

extern const NDK_ADAPTER_DISPATCH kAdapterDispatch;
extern const NDK_PD_DISPATCH kPdDispatch;
extern const NDK_MR_DISPATCH kMrDispatch;
extern const NDK_CQ_DISPATCH kCqDispatch;
extern const NDK_QP_DISPATCH kQpDispatch;
extern const NDK_SRQ_DISPATCH kSrqDispatch;
extern const NDK_MW_DISPATCH kMwDispatch;
extern const NDK_CONNECTOR_DISPATCH kConnectorDispatch;
extern const NDK_LISTENER_DISPATCH kListenerDispatch;
extern const NDK_SHARED_ENDPOINT_DISPATCH kSharedEndpointDispatch;

// Create functions that live beside their object's dispatch table.
NTSTATUS CreateCq(NDK_ADAPTER* adapter, ULONG depth, NDK_FN_CQ_NOTIFICATION_CALLBACK notification, PVOID context,
                  GROUP_AFFINITY* affinity, NDK_FN_CREATE_COMPLETION completion, PVOID request_context, NDK_CQ** out);
NTSTATUS CreateConnector(NDK_ADAPTER* adapter, NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_CONNECTOR** out);
NTSTATUS CreateListener(NDK_ADAPTER* adapter, NDK_FN_CONNECT_EVENT_CALLBACK connect_event, PVOID connect_context,
                        NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_LISTENER** out);
NTSTATUS CreateSharedEndpoint(NDK_ADAPTER* adapter, const PSOCKADDR address, ULONG length,
                              NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_SHARED_ENDPOINT** out);
NTSTATUS CreateMw(NDK_PD* pd, NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_MW** out);
NTSTATUS CreateSrq(NDK_PD* pd, ULONG depth, ULONG max_sge, ULONG threshold, NDK_FN_SRQ_NOTIFICATION_CALLBACK notify,
                   PVOID notify_context, GROUP_AFFINITY* affinity, NDK_FN_CREATE_COMPLETION completion, PVOID context,
                   NDK_SRQ** out);
NTSTATUS CreateQp(NDK_PD* pd, NDK_CQ* receive_cq, NDK_CQ* initiator_cq, PVOID qp_context, ULONG receive_depth,
                  ULONG initiator_depth, ULONG max_receive_sge, ULONG max_initiator_sge, ULONG inline_size,
                  NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_QP** out);
NTSTATUS CreateQpWithSrq(NDK_PD* pd, NDK_CQ* receive_cq, NDK_CQ* initiator_cq, NDK_SRQ* srq, PVOID qp_context,
                         ULONG initiator_depth, ULONG max_initiator_sge, ULONG inline_size,
                         NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_QP** out);
// Local and peer addresses of a connector, for the listener/shared-endpoint code.
bool AdapterOwnsAddress(const AdapterObject& adapter, const cm::Endpoint& endpoint, bool allow_wildcard);
// The addresses an adapter owns, for a refusal's text: "127.0.0.1, ::1 and every address of this host".
std::string DescribeOwnedAddresses(const AdapterObject& adapter);

}  // namespace softndk::api
