// The IRQL model and the Verifier (issue 9 §3): per-thread IRQL, reports in the shape of a Driver Verifier
// bug check (rule, call, IRQL, detail, backtrace), and the provider hooks of src/api/verifier_hooks.h:
// callbacks at DISPATCH_LEVEL (CB-09), closed handles (LIFE-05/06), concurrent posts (QP-05), MDL chains of
// pending registrations (MR-10).
#include <execinfo.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/verifier_hooks.h"
#include "km/km_internal.h"

namespace softndk::km {
namespace {

thread_local KIRQL t_irql = PASSIVE_LEVEL;
struct CallbackFrame {
    KIRQL saved_irql;
    const char* function;  // the request a completion completes, or null
    const void* request_context;
};
thread_local std::vector<CallbackFrame> t_callbacks;  // nested provider callbacks, innermost last
thread_local bool t_reporting = false;

std::atomic<int> g_mode{SOFTNDK_VERIFIER_ABORT};
std::atomic<ULONG> g_violations{0};
std::mutex g_callback_mutex;
SOFTNDK_VERIFIER_CALLBACK g_callback = nullptr;
PVOID g_callback_context = nullptr;

std::string Backtrace() {
    void* frames[32];
    int count = backtrace(frames, 32);
    char** symbols = backtrace_symbols(frames, count);
    std::string text;
    for (int i = 2; i < count; ++i) {  // skip Report and its helper
        text += "      #" + std::to_string(i - 2) + " " + (symbols != nullptr ? symbols[i] : "?") + "\n";
    }
    std::free(symbols);
    return text;
}

// ---- the provider's objects, as the Verifier sees them ----
enum class ObjectState { kLive, kClosing, kDestroyed };
struct ObjectEntry {
    NDK_OBJECT_TYPE type;
    ObjectState state;
};
struct Quarantined {
    void* memory;
    void (*release)(void*);
};
struct Poster {
    std::thread::id thread;
    uint32_t depth;
};
struct Registry {
    std::mutex mutex;
    std::unordered_map<const void*, ObjectEntry> objects;
    std::deque<Quarantined> quarantine;
    std::unordered_map<const void*, Poster> posters;                       // QP-05
    std::unordered_map<const void*, const void*> busy_mdls;                // MR-10: mdl -> request owner
    std::unordered_map<const void*, std::vector<const void*>> owner_mdls;  // owner -> its busy mdls
};
Registry& Objects() {
    static auto* registry = new Registry();
    return *registry;
}
constexpr size_t kQuarantineDepth = 4096;

const char* TypeName(NDK_OBJECT_TYPE type) {
    static const char* const names[] = {"object", "adapter",         "QP",        "CQ",       "MR", "MW",
                                        "PD",     "shared endpoint", "connector", "listener", "SRQ"};
    return type >= 0 && type < NdkObjectTypeMax ? names[type] : "object";
}

// ---- hooks ----
void EnterCallback(const char* function, const void* request_context) {
    t_callbacks.push_back(CallbackFrame{t_irql, function, request_context});
    if (t_irql < DISPATCH_LEVEL) t_irql = DISPATCH_LEVEL;
}
void LeaveCallback() {
    KIRQL saved = t_callbacks.empty() ? PASSIVE_LEVEL : t_callbacks.back().saved_irql;
    if (!t_callbacks.empty()) t_callbacks.pop_back();
    KIRQL expected = saved < DISPATCH_LEVEL ? DISPATCH_LEVEL : saved;
    if (t_irql != expected)
        Report("IRQL_UNEXPECTED_VALUE", kDriverVerifierDetectedViolation, "consumer callback",
               "a consumer callback was called at %s and returned at %s", IrqlName(expected), IrqlName(t_irql));
    t_irql = saved;
}
BOOLEAN CheckHandle(const void* handle) {
    Registry& registry = Objects();
    NDK_OBJECT_TYPE type = NdkObjectTypeUndefined;
    {
        std::lock_guard lock(registry.mutex);
        auto it = registry.objects.find(handle);
        if (it == registry.objects.end() || it->second.state != ObjectState::kDestroyed) return TRUE;
        type = it->second.type;
    }
    Report("NDK_LIFE_06_USE_AFTER_CLOSE", kDriverVerifierDetectedViolation, "NDK provider function",
           "the %s %p was used after its close completed; the call is refused", TypeName(type), handle);
    return FALSE;
}
void ObjectCreated(const void* handle, NDK_OBJECT_TYPE type) {
    ReportRefusalsOf(const_cast<void*>(handle), type);
    Registry& registry = Objects();
    std::lock_guard lock(registry.mutex);
    registry.objects[handle] = ObjectEntry{type, ObjectState::kLive};
}
BOOLEAN CloseStarted(const void* handle) {
    Registry& registry = Objects();
    NDK_OBJECT_TYPE type = NdkObjectTypeUndefined;
    {
        std::lock_guard lock(registry.mutex);
        auto it = registry.objects.find(handle);
        if (it == registry.objects.end()) return TRUE;
        if (it->second.state == ObjectState::kLive) {
            it->second.state = ObjectState::kClosing;
            return TRUE;
        }
        type = it->second.type;
    }
    Report("NDK_LIFE_05_CLOSED_TWICE", kDriverVerifierDetectedViolation, "NdkCloseObject",
           "the %s %p is closed a second time while its first close is pending; the call is refused", TypeName(type),
           handle);
    return FALSE;
}
BOOLEAN RetainDestroyed(void* memory, void (*release)(void*)) {
    Registry& registry = Objects();
    Quarantined evicted{nullptr, nullptr};
    {
        std::lock_guard lock(registry.mutex);
        auto it = registry.objects.find(memory);
        if (it == registry.objects.end()) return FALSE;
        it->second.state = ObjectState::kDestroyed;
        registry.quarantine.push_back(Quarantined{memory, release});
        if (registry.quarantine.size() > kQuarantineDepth) {
            evicted = registry.quarantine.front();
            registry.quarantine.pop_front();
            registry.objects.erase(evicted.memory);
        }
    }
    if (evicted.memory != nullptr) evicted.release(evicted.memory);
    return TRUE;
}
void PassiveEntry(const char* function) {
    if (t_irql > PASSIVE_LEVEL)
        Report("NDK_PASSIVE_LEVEL_ONLY", kIrqlNotLessOrEqual, function,
               "%s may only be called at PASSIVE_LEVEL (CB-09), the caller is at %s", function, IrqlName(t_irql));
}
BOOLEAN PostBegin(const void* queue, const char* function) {
    Registry& registry = Objects();
    const std::thread::id me = std::this_thread::get_id();
    {
        std::lock_guard lock(registry.mutex);
        auto [it, inserted] = registry.posters.try_emplace(queue, Poster{me, 0});
        if (inserted || it->second.thread == me) {
            ++it->second.depth;
            return TRUE;
        }
    }
    Report("NDK_QP_05_CONCURRENT_POST", kDriverVerifierDetectedViolation, function,
           "%s on queue %p while another thread is posting to the same queue (QP-05: the consumer serialises "
           "posts per queue); the call is refused",
           function, queue);
    return FALSE;
}
void PostEnd(const void* queue) {
    Registry& registry = Objects();
    std::lock_guard lock(registry.mutex);
    auto it = registry.posters.find(queue);
    if (it != registry.posters.end() && --it->second.depth == 0) registry.posters.erase(it);
}
void RegistrationStarted(const void* chain, const void* owner) {
    Registry& registry = Objects();
    const void* clash = nullptr;
    {
        std::lock_guard lock(registry.mutex);
        for (const MDL* mdl = static_cast<const MDL*>(chain); mdl != nullptr; mdl = mdl->Next) {
            auto [it, inserted] = registry.busy_mdls.try_emplace(mdl, owner);
            if (!inserted && it->second != owner) clash = mdl;
            registry.owner_mdls[owner].push_back(mdl);
        }
    }
    if (clash != nullptr)
        Report("NDK_MR_10_MDL_IN_USE", kDriverVerifierDetectedViolation, "NdkRegisterMr",
               "MDL %p is registered while another registration of it is pending (MR-10)", clash);
}
void RequestFinished(const void* owner) {
    Registry& registry = Objects();
    std::lock_guard lock(registry.mutex);
    auto it = registry.owner_mdls.find(owner);
    if (it == registry.owner_mdls.end()) return;
    for (const void* mdl : it->second) {
        auto busy = registry.busy_mdls.find(mdl);
        if (busy != registry.busy_mdls.end() && busy->second == owner) registry.busy_mdls.erase(busy);
    }
    registry.owner_mdls.erase(it);
}

void ConsumerRule(const char* rule, const char* function, const char* detail) {
    ReportTolerated(rule, function, detail);
}

constexpr SoftNdkVerifierHooks kHooks = {
    &EnterCallback,          &LeaveCallback, &CheckHandle, &ObjectCreated,       &CloseStarted,    &RetainDestroyed,
    &PassiveEntry,           &PostBegin,     &PostEnd,     &RegistrationStarted, &RequestFinished, &ConsumerRule,
    &ReportFailedCompletion,
};

// With the Verifier off the refusal reports stay (issue 19 §3): every other hook lets the call through.
constexpr SoftNdkVerifierHooks kReportOnlyHooks = {
    [](const char*, const void*) {},
    [] {},
    [](const void*) -> BOOLEAN { return TRUE; },
    [](const void* handle, NDK_OBJECT_TYPE type) { ReportRefusalsOf(const_cast<void*>(handle), type); },
    [](const void*) -> BOOLEAN { return TRUE; },
    [](void*, void (*)(void*)) -> BOOLEAN { return FALSE; },
    [](const char*) {},
    [](const void*, const char*) -> BOOLEAN { return TRUE; },
    [](const void*) {},
    [](const void*, const void*) {},
    [](const void*) {},
    [](const char*, const char*, const char*) {},
    &ReportFailedCompletion,
};

enum class ToleratedAction { kWarn, kAbort, kQuiet };
ToleratedAction Tolerated() {
    static const ToleratedAction action = [] {
        const char* setting = std::getenv("SOFTNDK_VERIFIER_TOLERATED");
        if (setting != nullptr && std::strcmp(setting, "abort") == 0) return ToleratedAction::kAbort;
        if (setting != nullptr && std::strcmp(setting, "off") == 0) return ToleratedAction::kQuiet;
        return ToleratedAction::kWarn;
    }();
    return action;
}

// The request whose completion is running on this thread, if any: "the completion of NdkConnect, ...".
std::string InsideCompletion() {
    for (auto it = t_callbacks.rbegin(); it != t_callbacks.rend(); ++it) {
        if (it->function == nullptr) continue;
        char line[160];
        std::snprintf(line, sizeof(line), "    inside: the completion of %s, RequestContext %p\n", it->function,
                      it->request_context);
        return line;
    }
    return "";
}

// The kernel layer is active as soon as it is loaded: the mode comes from SOFTNDK_VERIFIER (default abort).
__attribute__((constructor)) void InstallAtLoad() {
    const char* mode = std::getenv("SOFTNDK_VERIFIER");
    SOFTNDK_VERIFIER_MODE initial = SOFTNDK_VERIFIER_ABORT;
    if (mode != nullptr && std::strcmp(mode, "off") == 0) initial = SOFTNDK_VERIFIER_OFF;
    if (mode != nullptr && std::strcmp(mode, "log") == 0) initial = SOFTNDK_VERIFIER_LOG;
    SoftNdkKmSetVerifierMode(initial);
    // Special pool comes with the Verifier, as with Driver Verifier's standard settings (issue 19 §3).
    const char* special = std::getenv("SOFTNDK_SPECIAL_POOL");
    if (initial != SOFTNDK_VERIFIER_OFF && (special == nullptr || std::strcmp(special, "off") != 0))
        SoftNdkSetSpecialPool(TRUE);
}

}  // namespace

KIRQL CurrentIrql() {
    return t_irql;
}
void SetIrql(KIRQL irql) {
    t_irql = irql;
}
const char* IrqlName(KIRQL irql) {
    switch (irql) {
        case PASSIVE_LEVEL:
            return "PASSIVE_LEVEL";
        case APC_LEVEL:
            return "APC_LEVEL";
        case DISPATCH_LEVEL:
            return "DISPATCH_LEVEL";
        default:
            return irql >= HIGH_LEVEL ? "HIGH_LEVEL" : "a device IRQL";
    }
}

SOFTNDK_VERIFIER_MODE Mode() {
    return static_cast<SOFTNDK_VERIFIER_MODE>(g_mode.load(std::memory_order_relaxed));
}

namespace {
// The test's or tool's callback sees each report (bug check 0: a tolerated rule's warning).
void Deliver(const char* rule, ULONG bug_check, const char* call, const char* detail, const std::string& frames) {
    std::lock_guard lock(g_callback_mutex);
    if (g_callback == nullptr) return;
    SOFTNDK_VERIFIER_REPORT report{rule, bug_check, call, t_irql, detail, frames.c_str()};
    g_callback(g_callback_context, &report);
}
}  // namespace

void Report(const char* rule, ULONG bug_check, const char* call, const char* format, ...) {
    if (Mode() == SOFTNDK_VERIFIER_OFF || t_reporting) return;
    t_reporting = true;
    char detail[512];
    va_list args;
    va_start(args, format);
    std::vsnprintf(detail, sizeof(detail), format, args);
    va_end(args);
    const std::string frames = Backtrace();
    std::fprintf(stderr,
                 "\n*** SOFTNDK VERIFIER: %s (bug check 0x%X)\n    call:   %s at %s\n    detail: %s\n%s    "
                 "backtrace:\n%s",
                 rule, bug_check, call, IrqlName(t_irql), detail, InsideCompletion().c_str(), frames.c_str());
    g_violations.fetch_add(1, std::memory_order_relaxed);
    Deliver(rule, bug_check, call, detail, frames);
    t_reporting = false;
    if (Mode() == SOFTNDK_VERIFIER_ABORT) {
        std::fprintf(stderr, "*** SOFTNDK VERIFIER: stopping like a bug check (SOFTNDK_VERIFIER=log to continue)\n");
        std::abort();
    }
}

void ReportTolerated(const char* rule, const char* call, const char* detail) {
    if (Mode() == SOFTNDK_VERIFIER_OFF || Tolerated() == ToleratedAction::kQuiet || t_reporting) return;
    if (Tolerated() == ToleratedAction::kAbort) {
        Report(rule, kDriverVerifierDetectedViolation, call, "%s (SOFTNDK_VERIFIER_TOLERATED=abort)", detail);
        return;
    }
    t_reporting = true;
    const std::string frames = Backtrace();
    std::fprintf(stderr,
                 "\n*** SOFTNDK VERIFIER WARNING: %s (tolerated, as hardware does)\n    call:   %s at %s\n    detail: "
                 "%s\n%s    backtrace:\n%s    SOFTNDK_VERIFIER_TOLERATED=abort stops here instead\n",
                 rule, call, IrqlName(t_irql), detail, InsideCompletion().c_str(), frames.c_str());
    Deliver(rule, 0, call, detail, frames);
    t_reporting = false;
}

bool RequireIrqlAtMost(KIRQL max, const char* call) {
    if (t_irql <= max) return true;
    Report("IRQL_NOT_LESS_OR_EQUAL", kIrqlNotLessOrEqual, call, "%s requires IRQL <= %s", call, IrqlName(max));
    return false;
}

void ForgetObject(const void* handle) {
    Registry& registry = Objects();
    std::lock_guard lock(registry.mutex);
    registry.objects.erase(handle);
}

bool MdlBusy(const void* mdl) {
    Registry& registry = Objects();
    std::lock_guard lock(registry.mutex);
    return registry.busy_mdls.count(mdl) != 0;
}

ULONG LiveNdkObjects() {
    Registry& registry = Objects();
    std::lock_guard lock(registry.mutex);
    ULONG live = 0;
    for (const auto& [handle, entry] : registry.objects)
        if (entry.state != ObjectState::kDestroyed && entry.type != NdkObjectTypeAdapter) ++live;
    return live;
}

void ReleaseQuarantine() {
    Registry& registry = Objects();
    std::deque<Quarantined> released;
    {
        std::lock_guard lock(registry.mutex);
        released.swap(registry.quarantine);
        for (const Quarantined& q : released) registry.objects.erase(q.memory);
    }
    for (const Quarantined& q : released) q.release(q.memory);
}

}  // namespace softndk::km

using namespace softndk::km;

extern "C" {

KIRQL KeGetCurrentIrql(void) {
    return CurrentIrql();
}

KIRQL KfRaiseIrql(KIRQL NewIrql) {
    KIRQL old = CurrentIrql();
    if (NewIrql < old)
        Report("IRQL_NOT_GREATER_OR_EQUAL", kIrqlNotGreaterOrEqual, "KeRaiseIrql", "raising from %s to %s",
               IrqlName(old), IrqlName(NewIrql));
    SetIrql(NewIrql);
    return old;
}

VOID KeLowerIrql(KIRQL NewIrql) {
    if (NewIrql > CurrentIrql())
        Report("IRQL_NOT_LESS_OR_EQUAL", kIrqlNotLessOrEqual, "KeLowerIrql", "lowering from %s to %s",
               IrqlName(CurrentIrql()), IrqlName(NewIrql));
    SetIrql(NewIrql);
}

KIRQL KeRaiseIrqlToDpcLevel(void) {
    return KfRaiseIrql(DISPATCH_LEVEL);
}

VOID SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_MODE Mode) {
    g_mode.store(Mode, std::memory_order_relaxed);
    const SoftNdkVerifierHooks* hooks = &kHooks;
    if (Mode == SOFTNDK_VERIFIER_OFF) hooks = RefusalReportsEnabled() ? &kReportOnlyHooks : nullptr;
    SoftNdkSetVerifierHooks(hooks);
}
SOFTNDK_VERIFIER_MODE SoftNdkKmGetVerifierMode(void) {
    return Mode();
}
VOID SoftNdkKmSetVerifierCallback(SOFTNDK_VERIFIER_CALLBACK Callback, PVOID Context) {
    std::lock_guard lock(g_callback_mutex);
    g_callback = Callback;
    g_callback_context = Context;
}
ULONG SoftNdkKmVerifierViolationCount(void) {
    return g_violations.load(std::memory_order_relaxed);
}

}  // extern "C"
