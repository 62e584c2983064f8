// Issue 19 §3: under the kernel layer every refusal of a consumer's NDK call is printed, whatever SOFTNDK_LOG
// says: the function, the status by name and the reason (the provider's text, or what the status means).
// Each object's Dispatch pointer is swapped, when the object is created, for a copy of its table whose entries
// forward to the provider's and look at the status; the provider's tables are not touched. A consumer may
// replace that pointer in turn with its own copy (issue 33 §4.2): the forwarders find the provider's table
// without it. Size queries (STATUS_BUFFER_TOO_SMALL with the size needed) are answers, not refusals. A request that
// fails later, through its completion, is said too ("failed in its completion"). SOFTNDK_KM_REFUSALS=off silences it;
// repeats of one function and status stop after kPrintedRepeats.
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>

#include "km/km_internal.h"

namespace softndk::km {
namespace {

constexpr unsigned kPrintedRepeats = 10;

// Every NDK object starts with its header and its Dispatch pointer (ndkpi.h, SOFTNDK_DECLARE_OBJECT).
struct ObjectView {
    NDK_OBJECT_HEADER header;
    const void* dispatch;
};

template <class Table>
struct WrappedTable {
    Table table;  // first: the object's Dispatch points here
    const Table* original;
};

template <class Table>
constexpr size_t kSlots = sizeof(Table) / sizeof(void*);
template <class Table>
const char* g_slot_names[kSlots<Table>];

bool Enabled() {
    static const bool enabled = [] {
        const char* setting = std::getenv("SOFTNDK_KM_REFUSALS");
        return setting == nullptr || (std::strcmp(setting, "off") != 0 && std::strcmp(setting, "0") != 0);
    }();
    return enabled;
}

// What a status means when the provider recorded no text for it.
const char* GenericReason(NTSTATUS status) {
    switch (status) {
        case STATUS_INVALID_HANDLE:
            return "the handle is not a live object of this type, or the token is stale";
        case STATUS_INVALID_PARAMETER:
            return "a parameter is out of range for this call";
        case STATUS_INSUFFICIENT_RESOURCES:
            return "a queue is full or a limit is reached (the adapter's limits: NdkQueryAdapterInfo)";
        case STATUS_INVALID_DEVICE_STATE:
        case STATUS_INVALID_DEVICE_REQUEST:
            return "the object's state does not allow this call now";
        case STATUS_CONNECTION_INVALID:
            return "the QP or connector is not connected";
        case STATUS_NOT_SUPPORTED:
            return "softndk does not implement this (docs/spec-decisions.md)";
        case STATUS_BUFFER_TOO_SMALL:
            return "the buffer is too small";
        case STATUS_ACCESS_VIOLATION:
            return "the memory is not accessible as asked";
        case STATUS_CONNECTION_REFUSED:
            return "nobody listens at that address and port, or the peer rejected the connection";
        case STATUS_IO_TIMEOUT:
            return "the peer did not answer in time";
        case STATUS_CONNECTION_RESET:
        case STATUS_CONNECTION_ABORTED:
            return "the connection ended (the peer reset it, or a protocol error)";
        case STATUS_CANCELLED:
            return "cancelled: the object closed or the connection ended first";
        default:
            return "no detail recorded";
    }
}

// `handle` null: the call failed later, through its completion (no reason recorded for it on this thread).
void Refused(const char* function, NTSTATUS status, const void* handle) {
    static auto* mutex = new std::mutex();
    static auto* seen = new std::map<std::pair<const char*, NTSTATUS>, unsigned>();
    unsigned count;
    {
        std::lock_guard lock(*mutex);
        count = ++(*seen)[{function, status}];
    }
    if (count > kPrintedRepeats + 1) return;
    if (count == kPrintedRepeats + 1) {
        std::fprintf(stderr, "softndk: %s: further refusals with 0x%08X are not printed\n", function,
                     static_cast<unsigned>(status));
        return;
    }
    const char* name = SoftNdkStatusName(status);
    if (handle == nullptr) {
        std::fprintf(stderr, "softndk: %s failed in its completion: %s (0x%08X): %s\n", function,
                     name != nullptr ? name : "NTSTATUS", static_cast<unsigned>(status), GenericReason(status));
        return;
    }
    const char* text = SoftNdkGetLastErrorText();
    std::fprintf(stderr, "softndk: %s(%p) refused: %s (0x%08X): %s\n", function, handle,
                 name != nullptr ? name : "NTSTATUS", static_cast<unsigned>(status),
                 text != nullptr && text[0] != '\0' ? text : GenericReason(status));
}

// NDK answers a size query with STATUS_BUFFER_TOO_SMALL and the size needed (NdkQueryAdapterInfo,
// NdkGetConnectionData, NdkBuildLAM's LAM-06, the address getters): an answer, not a refusal.
bool SizeQuery(NTSTATUS status) {
    return status == STATUS_BUFFER_TOO_SMALL;
}

// Issue 33 §4.2: every forwarding table made for `Table`, found without the object's Dispatch: a consumer or
// filter may have replaced that with its own copy of our table (copy, override one entry, forward to the
// original), and reading our original through the copy made every call recurse until the stack overflowed.
template <class Table>
struct Forwarders {
    static constexpr size_t kMax = 8;  // softndk has one provider table per object type
    std::atomic<const WrappedTable<Table>*> made[kMax];
    std::atomic<size_t> count{0};
};
template <class Table>
Forwarders<Table> g_forwarders;

// The provider's table behind `handle`: the original of our forwarding table when the object's Dispatch is
// still one; else (a replaced Dispatch) the provider's only table of this type. Null when neither holds.
template <class Table>
const Table* OriginalOf(const void* handle) {
    const void* current = static_cast<const ObjectView*>(handle)->dispatch;
    Forwarders<Table>& forwarders = g_forwarders<Table>;
    const size_t count = forwarders.count.load(std::memory_order_acquire);
    for (size_t i = 0; i < count; ++i) {
        const WrappedTable<Table>* wrapped = forwarders.made[i].load(std::memory_order_relaxed);
        if (current == &wrapped->table) return wrapped->original;
    }
    return count == 1 ? forwarders.made[0].load(std::memory_order_relaxed)->original : nullptr;
}

// A replaced Dispatch table behind which the provider's table cannot be told (several of this type): refused
// with a report, never a guess and never a recursion.
void UnresolvedDispatch(const void* handle, const char* function) {
    Report("NDK_DISPATCH_REPLACED_UNRESOLVED", kDriverVerifierDetectedViolation, function,
           "the object %p (type %d) has a replaced Dispatch table %p and the provider's own table for its %s entry "
           "cannot be told; the call is refused. Forward to the table read from Dispatch before replacing it",
           handle, static_cast<int>(static_cast<const ObjectView*>(handle)->header.ObjectType),
           static_cast<const ObjectView*>(handle)->dispatch, function);
}

template <class Table, size_t Slot, class Function>
struct Forward;

template <class Table, size_t Slot, class Result, class Handle, class... Args>
struct Forward<Table, Slot, Result (*)(Handle, Args...)> {
    using Function = Result (*)(Handle, Args...);
    static Result Call(Handle handle, Args... args) {
        const Table* original = OriginalOf<Table>(handle);
        if (original == nullptr) {
            UnresolvedDispatch(handle, g_slot_names<Table>[Slot]);
            if constexpr (std::is_same_v<Result, NTSTATUS>) return STATUS_INVALID_DEVICE_REQUEST;
            if constexpr (!std::is_void_v<Result>)
                return Result{};
            else
                return;
        }
        Function target;
        std::memcpy(&target, reinterpret_cast<const char*>(original) + Slot * sizeof(void*), sizeof(target));
        if constexpr (std::is_same_v<Result, NTSTATUS>) {
            SoftNdkClearLastErrorText();
            const NTSTATUS status = target(handle, args...);
            const char* function = g_slot_names<Table>[Slot];
            if (!NT_SUCCESS(status) && !SizeQuery(status)) Refused(function, status, handle);
            return status;
        } else {
            return target(handle, args...);
        }
    }
};

#define SOFTNDK_FORWARD(Table, member)                                                                      \
    table.member = &Forward<Table, offsetof(Table, member) / sizeof(void*), decltype(Table::member)>::Call; \
    g_slot_names<Table>[offsetof(Table, member) / sizeof(void*)] = #member;

void Fill(NDK_ADAPTER_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_ADAPTER_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_ADAPTER_DISPATCH, NdkQueryAdapterInfo)
    SOFTNDK_FORWARD(NDK_ADAPTER_DISPATCH, NdkCreateCq)
    SOFTNDK_FORWARD(NDK_ADAPTER_DISPATCH, NdkCreatePd)
    SOFTNDK_FORWARD(NDK_ADAPTER_DISPATCH, NdkCreateSharedEndpoint)
    SOFTNDK_FORWARD(NDK_ADAPTER_DISPATCH, NdkCreateConnector)
    SOFTNDK_FORWARD(NDK_ADAPTER_DISPATCH, NdkCreateListener)
    SOFTNDK_FORWARD(NDK_ADAPTER_DISPATCH, NdkBuildLAM)
    SOFTNDK_FORWARD(NDK_ADAPTER_DISPATCH, NdkReleaseLAM)
}
void Fill(NDK_CONNECTOR_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkCloseConnector)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkConnect)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkConnectWithSharedEndpoint)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkCompleteConnect)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkAccept)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkReject)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkGetConnectionData)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkGetLocalAddress)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkGetPeerAddress)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkDisconnect)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkCompleteConnectEx)
    SOFTNDK_FORWARD(NDK_CONNECTOR_DISPATCH, NdkAcceptEx)
}
void Fill(NDK_CQ_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_CQ_DISPATCH, NdkCloseCq)
    SOFTNDK_FORWARD(NDK_CQ_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_CQ_DISPATCH, NdkResizeCq)
    SOFTNDK_FORWARD(NDK_CQ_DISPATCH, NdkArmCq)
    SOFTNDK_FORWARD(NDK_CQ_DISPATCH, NdkGetCqResults)
    SOFTNDK_FORWARD(NDK_CQ_DISPATCH, NdkControlCqInterruptModeration)
    SOFTNDK_FORWARD(NDK_CQ_DISPATCH, NdkGetCqResultsEx)
}
void Fill(NDK_LISTENER_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_LISTENER_DISPATCH, NdkCloseListener)
    SOFTNDK_FORWARD(NDK_LISTENER_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_LISTENER_DISPATCH, NdkListen)
    SOFTNDK_FORWARD(NDK_LISTENER_DISPATCH, NdkGetLocalAddress)
    SOFTNDK_FORWARD(NDK_LISTENER_DISPATCH, NdkControlConnectEvents)
}
void Fill(NDK_MR_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_MR_DISPATCH, NdkCloseMr)
    SOFTNDK_FORWARD(NDK_MR_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_MR_DISPATCH, NdkRegisterMr)
    SOFTNDK_FORWARD(NDK_MR_DISPATCH, NdkDeregisterMr)
    SOFTNDK_FORWARD(NDK_MR_DISPATCH, NdkInitializeFastRegisterMr)
    SOFTNDK_FORWARD(NDK_MR_DISPATCH, NdkGetRemoteTokenFromMr)
    SOFTNDK_FORWARD(NDK_MR_DISPATCH, NdkGetLocalTokenFromMr)
}
void Fill(NDK_MW_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_MW_DISPATCH, NdkCloseMw)
    SOFTNDK_FORWARD(NDK_MW_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_MW_DISPATCH, NdkGetRemoteTokenFromMw)
}
void Fill(NDK_PD_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_PD_DISPATCH, NdkClosePd)
    SOFTNDK_FORWARD(NDK_PD_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_PD_DISPATCH, NdkCreateMr)
    SOFTNDK_FORWARD(NDK_PD_DISPATCH, NdkCreateMw)
    SOFTNDK_FORWARD(NDK_PD_DISPATCH, NdkCreateSrq)
    SOFTNDK_FORWARD(NDK_PD_DISPATCH, NdkCreateQp)
    SOFTNDK_FORWARD(NDK_PD_DISPATCH, NdkCreateQpWithSrq)
    SOFTNDK_FORWARD(NDK_PD_DISPATCH, NdkGetPrivilegedMemoryRegionToken)
}
void Fill(NDK_QP_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkCloseQp)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkFlush)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkSend)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkReceive)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkBind)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkFastRegister)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkInvalidate)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkRead)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkWrite)
    SOFTNDK_FORWARD(NDK_QP_DISPATCH, NdkSendAndInvalidate)
}
void Fill(NDK_SHARED_ENDPOINT_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_SHARED_ENDPOINT_DISPATCH, NdkCloseSharedEndpoint)
    SOFTNDK_FORWARD(NDK_SHARED_ENDPOINT_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_SHARED_ENDPOINT_DISPATCH, NdkGetLocalAddress)
}
void Fill(NDK_SRQ_DISPATCH& table) {
    SOFTNDK_FORWARD(NDK_SRQ_DISPATCH, NdkCloseSrq)
    SOFTNDK_FORWARD(NDK_SRQ_DISPATCH, NdkQueryExtension)
    SOFTNDK_FORWARD(NDK_SRQ_DISPATCH, NdkModifySrq)
    SOFTNDK_FORWARD(NDK_SRQ_DISPATCH, NdkSrqReceive)
}
#undef SOFTNDK_FORWARD

// One forwarding table per provider table, made the first time an object with it appears; never freed (a
// stale handle's Dispatch may still point at it).
// Never destroyed: objects may outlive static destruction, and the tables stay reachable (no leak report).
std::mutex& WrappersMutex() {
    static auto* mutex = new std::mutex();
    return *mutex;
}
std::set<const void*>& Wrappers() {  // every forwarding table: an object is wrapped once
    static auto* wrappers = new std::set<const void*>();
    return *wrappers;
}

template <class Table>
const void* WrapperOf(const void* original) {
    static auto* made = new std::map<const void*, const WrappedTable<Table>*>();  // under WrappersMutex()
    std::lock_guard lock(WrappersMutex());
    if (Wrappers().count(original) != 0) return original;
    auto it = made->find(original);
    if (it != made->end()) return &it->second->table;
    Forwarders<Table>& forwarders = g_forwarders<Table>;
    const size_t count = forwarders.count.load(std::memory_order_relaxed);
    if (count == Forwarders<Table>::kMax) return original;  // more provider tables than kept: not wrapped
    auto* wrapped = new WrappedTable<Table>{*static_cast<const Table*>(original), static_cast<const Table*>(original)};
    Fill(wrapped->table);
    forwarders.made[count].store(wrapped, std::memory_order_relaxed);
    forwarders.count.store(count + 1, std::memory_order_release);
    made->emplace(original, wrapped);
    Wrappers().insert(&wrapped->table);
    return &wrapped->table;
}

const void* WrapperFor(NDK_OBJECT_TYPE type, const void* original) {
    switch (type) {
        case NdkObjectTypeAdapter:
            return WrapperOf<NDK_ADAPTER_DISPATCH>(original);
        case NdkObjectTypePd:
            return WrapperOf<NDK_PD_DISPATCH>(original);
        case NdkObjectTypeCq:
            return WrapperOf<NDK_CQ_DISPATCH>(original);
        case NdkObjectTypeMr:
            return WrapperOf<NDK_MR_DISPATCH>(original);
        case NdkObjectTypeMw:
            return WrapperOf<NDK_MW_DISPATCH>(original);
        case NdkObjectTypeQp:
            return WrapperOf<NDK_QP_DISPATCH>(original);
        case NdkObjectTypeSrq:
            return WrapperOf<NDK_SRQ_DISPATCH>(original);
        case NdkObjectTypeConnector:
            return WrapperOf<NDK_CONNECTOR_DISPATCH>(original);
        case NdkObjectTypeListener:
            return WrapperOf<NDK_LISTENER_DISPATCH>(original);
        case NdkObjectTypeSharedEndpoint:
            return WrapperOf<NDK_SHARED_ENDPOINT_DISPATCH>(original);
        default:
            return original;
    }
}

}  // namespace

void ReportFailedCompletion(const char* function, NTSTATUS status) {
    if (Enabled()) Refused(function, status, nullptr);
}

bool RefusalReportsEnabled() {
    return Enabled();
}

void ReportRefusalsOf(void* handle, NDK_OBJECT_TYPE type) {
    if (!Enabled() || handle == nullptr) return;
    auto* view = static_cast<ObjectView*>(handle);
    view->dispatch = WrapperFor(type, view->dispatch);
}

}  // namespace softndk::km
