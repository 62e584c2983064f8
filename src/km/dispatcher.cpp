// Dispatcher objects (KEVENT, KSEMAPHORE, KTIMER), waits with timeouts, DPCs on a DPC thread at
// DISPATCH_LEVEL, timers on a timer thread, delays and clocks (issue 9 §2). One mutex and one condition
// guard every dispatcher object: waits re-test their objects whenever any object is signalled, which makes
// WaitAny and WaitAll one loop and is plenty for a driver's handful of waiters.
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <thread>
#include <unordered_map>

#include "km/km_internal.h"

namespace softndk::km {
namespace {

using Clock = std::chrono::steady_clock;

enum DispatcherType : UCHAR {
    kNotificationEvent = 0,
    kSynchronizationEvent = 1,
    kSemaphore = 5,
    kNotificationTimer = 8,
    kSynchronizationTimer = 9,
};

bool Signalled(const DISPATCHER_HEADER* header) {
    return header->SignalState > 0;
}
void Satisfy(DISPATCHER_HEADER* header) {
    if (header->Type == kSynchronizationEvent || header->Type == kSynchronizationTimer) header->SignalState = 0;
    if (header->Type == kSemaphore) header->SignalState = header->SignalState - 1;
}

// 100 ns units between 1601-01-01 and 1970-01-01.
constexpr LONGLONG kEpochDifference = 116444736000000000LL;
LONGLONG SystemTime100ns() {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return kEpochDifference + static_cast<LONGLONG>(now.tv_sec) * 10000000LL + now.tv_nsec / 100;
}

// Timeout semantics of every Ke wait: NULL = forever, 0 = poll, < 0 relative, > 0 absolute (100 ns units).
bool Deadline(const LARGE_INTEGER* timeout, Clock::time_point* deadline) {
    if (timeout == nullptr) return false;
    LONGLONG relative = timeout->QuadPart <= 0 ? -timeout->QuadPart : timeout->QuadPart - SystemTime100ns();
    if (relative < 0) relative = 0;
    *deadline = Clock::now() + std::chrono::nanoseconds(relative * 100);
    return true;
}

// ---- timers and DPCs ----
struct TimerQueue {
    std::multimap<Clock::time_point, KTIMER*> due;
    std::unordered_map<KTIMER*, std::multimap<Clock::time_point, KTIMER*>::iterator> where;
    std::condition_variable wake;
    std::thread thread;
    bool stopping = false;
};
struct DpcQueue {
    std::mutex mutex;
    std::condition_variable wake;
    std::condition_variable idle;
    std::deque<KDPC*> queue;
    uint32_t running = 0;
    std::thread thread;
    std::thread::id thread_id;
    bool stopping = false;
};
TimerQueue& Timers() {
    static auto* timers = new TimerQueue();
    return *timers;
}
DpcQueue& Dpcs() {
    static auto* dpcs = new DpcQueue();
    return *dpcs;
}

void RunDpcs() {
    DpcQueue& dpcs = Dpcs();
    SetIrql(DISPATCH_LEVEL);  // the DPC thread lives at DISPATCH_LEVEL
    std::unique_lock lock(dpcs.mutex);
    while (true) {
        dpcs.wake.wait(lock, [&] { return dpcs.stopping || !dpcs.queue.empty(); });
        if (dpcs.queue.empty()) return;
        KDPC* dpc = dpcs.queue.front();
        dpcs.queue.pop_front();
        PKDEFERRED_ROUTINE routine = dpc->DeferredRoutine;
        PVOID context = dpc->DeferredContext, a1 = dpc->SystemArgument1, a2 = dpc->SystemArgument2;
        dpc->DpcData = nullptr;  // may be queued again from here on
        ++dpcs.running;
        lock.unlock();
        routine(dpc, context, a1, a2);
        if (CurrentIrql() != DISPATCH_LEVEL) {
            Report("IRQL_UNEXPECTED_VALUE", kDriverVerifierDetectedViolation, "DPC routine",
                   "the DPC routine %p returned at %s", reinterpret_cast<void*>(routine), IrqlName(CurrentIrql()));
            SetIrql(DISPATCH_LEVEL);
        }
        lock.lock();
        --dpcs.running;
        if (dpcs.queue.empty() && dpcs.running == 0) dpcs.idle.notify_all();
    }
}

void StartDpcThread() {
    static std::once_flag once;
    std::call_once(once, [] {
        DpcQueue& dpcs = Dpcs();
        dpcs.thread = std::thread(RunDpcs);
        dpcs.thread_id = dpcs.thread.get_id();
    });
}

void RunTimers() {
    TimerQueue& timers = Timers();
    std::unique_lock lock(DispatcherMutex());
    while (true) {
        if (timers.stopping) return;
        if (timers.due.empty()) {
            timers.wake.wait(lock);
            continue;
        }
        auto first = timers.due.begin();
        if (Clock::now() < first->first) {
            const Clock::time_point due = first->first;  // the node may go while we wait
            timers.wake.wait_until(lock, due);
            continue;
        }
        KTIMER* timer = first->second;
        timers.where.erase(timer);
        timers.due.erase(first);
        timer->Header.SignalState = 1;
        DispatcherCondition().notify_all();
        if (timer->Period > 0) {
            auto next = Clock::now() + std::chrono::milliseconds(timer->Period);
            timers.where[timer] = timers.due.emplace(next, timer);
        } else {
            timer->Header.Inserted = FALSE;
        }
        if (timer->Dpc != nullptr) {
            LARGE_INTEGER now;
            now.QuadPart = SystemTime100ns();
            KeInsertQueueDpc(timer->Dpc, reinterpret_cast<PVOID>(static_cast<ULONG_PTR>(now.LowPart)),
                             reinterpret_cast<PVOID>(static_cast<ULONG_PTR>(now.HighPart)));
        }
    }
}

void StartTimerThread() {
    static std::once_flag once;
    std::call_once(once, [] { Timers().thread = std::thread(RunTimers); });
}

// Removes an armed timer; the dispatcher mutex is held.
bool Disarm(KTIMER* timer) {
    TimerQueue& timers = Timers();
    auto it = timers.where.find(timer);
    if (it == timers.where.end()) return false;
    timers.due.erase(it->second);
    timers.where.erase(it);
    timer->Header.Inserted = FALSE;
    return true;
}

NTSTATUS Wait(ULONG count, PVOID* objects, WAIT_TYPE type, PLARGE_INTEGER timeout, const char* call) {
    if (timeout == nullptr || timeout->QuadPart != 0) RequireIrqlAtMost(APC_LEVEL, call);
    Clock::time_point deadline;
    const bool bounded = Deadline(timeout, &deadline);
    std::unique_lock lock(DispatcherMutex());
    while (true) {
        if (type == WaitAny) {
            for (ULONG i = 0; i < count; ++i) {
                auto* header = static_cast<DISPATCHER_HEADER*>(objects[i]);
                if (Signalled(header)) {
                    Satisfy(header);
                    return STATUS_WAIT_0 + static_cast<NTSTATUS>(i);
                }
            }
        } else {
            bool all = true;
            for (ULONG i = 0; i < count && all; ++i) all = Signalled(static_cast<DISPATCHER_HEADER*>(objects[i]));
            if (all) {
                for (ULONG i = 0; i < count; ++i) Satisfy(static_cast<DISPATCHER_HEADER*>(objects[i]));
                return STATUS_WAIT_0;
            }
        }
        if (!bounded) {
            DispatcherCondition().wait(lock);
        } else if (DispatcherCondition().wait_until(lock, deadline) == std::cv_status::timeout &&
                   Clock::now() >= deadline) {
            // one more test of the objects happens only if the deadline has not passed; it has
            return STATUS_TIMEOUT;
        }
    }
}

}  // namespace

std::mutex& DispatcherMutex() {
    static auto* mutex = new std::mutex();
    return *mutex;
}
std::condition_variable& DispatcherCondition() {
    static auto* condition = new std::condition_variable();
    return *condition;
}

ULONG TimersArmed() {
    std::lock_guard lock(DispatcherMutex());
    return static_cast<ULONG>(Timers().where.size());
}
ULONG DpcsOutstanding() {
    DpcQueue& dpcs = Dpcs();
    std::lock_guard lock(dpcs.mutex);
    return static_cast<ULONG>(dpcs.queue.size() + dpcs.running);
}

void ShutdownTimersAndDpcs() {
    TimerQueue& timers = Timers();
    {
        std::lock_guard lock(DispatcherMutex());
        timers.stopping = true;
    }
    timers.wake.notify_all();
    if (timers.thread.joinable()) timers.thread.join();
    DpcQueue& dpcs = Dpcs();
    {
        std::lock_guard lock(dpcs.mutex);
        dpcs.stopping = true;
    }
    dpcs.wake.notify_all();
    if (dpcs.thread.joinable()) dpcs.thread.join();
}

}  // namespace softndk::km

using namespace softndk::km;

extern "C" {

// ---- events ----
VOID KeInitializeEvent(PRKEVENT Event, EVENT_TYPE Type, BOOLEAN State) {
    Event->Header.Type = Type == SynchronizationEvent ? kSynchronizationEvent : kNotificationEvent;
    Event->Header.SignalState = State ? 1 : 0;
    Event->Header.Inserted = FALSE;
    InitializeListHead(&Event->Header.WaitListHead);
}

LONG KeSetEvent(PRKEVENT Event, KPRIORITY, BOOLEAN Wait) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "KeSetEvent");
    if (Wait) RequireIrqlAtMost(APC_LEVEL, "KeSetEvent(Wait = TRUE)");
    std::lock_guard lock(DispatcherMutex());
    LONG previous = Event->Header.SignalState;
    Event->Header.SignalState = 1;
    DispatcherCondition().notify_all();
    return previous;
}

VOID KeClearEvent(PRKEVENT Event) {
    std::lock_guard lock(DispatcherMutex());
    Event->Header.SignalState = 0;
}

LONG KeResetEvent(PRKEVENT Event) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "KeResetEvent");
    std::lock_guard lock(DispatcherMutex());
    LONG previous = Event->Header.SignalState;
    Event->Header.SignalState = 0;
    return previous;
}

LONG KeReadStateEvent(PRKEVENT Event) {
    std::lock_guard lock(DispatcherMutex());
    return Event->Header.SignalState;
}

// ---- semaphores ----
VOID KeInitializeSemaphore(PRKSEMAPHORE Semaphore, LONG Count, LONG Limit) {
    Semaphore->Header.Type = kSemaphore;
    Semaphore->Header.SignalState = Count;
    Semaphore->Header.Inserted = FALSE;
    InitializeListHead(&Semaphore->Header.WaitListHead);
    Semaphore->Limit = Limit;
}

LONG KeReleaseSemaphore(PRKSEMAPHORE Semaphore, KPRIORITY, LONG Adjustment, BOOLEAN Wait) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "KeReleaseSemaphore");
    if (Wait) RequireIrqlAtMost(APC_LEVEL, "KeReleaseSemaphore(Wait = TRUE)");
    std::lock_guard lock(DispatcherMutex());
    LONG previous = Semaphore->Header.SignalState;
    if (Adjustment <= 0 || previous > Semaphore->Limit - Adjustment) {
        // The kernel raises STATUS_SEMAPHORE_LIMIT_EXCEEDED; a driver bug either way.
        Report("SEMAPHORE_LIMIT_EXCEEDED", kKmodeExceptionNotHandled, "KeReleaseSemaphore",
               "count %d + adjustment %d exceeds the limit %d", previous, Adjustment, Semaphore->Limit);
        return previous;
    }
    Semaphore->Header.SignalState = previous + Adjustment;
    DispatcherCondition().notify_all();
    return previous;
}

LONG KeReadStateSemaphore(PRKSEMAPHORE Semaphore) {
    std::lock_guard lock(DispatcherMutex());
    return Semaphore->Header.SignalState;
}

// ---- waits ----
NTSTATUS KeWaitForSingleObject(PVOID Object, KWAIT_REASON, KPROCESSOR_MODE, BOOLEAN, PLARGE_INTEGER Timeout) {
    return Wait(1, &Object, WaitAny, Timeout, "KeWaitForSingleObject");
}

NTSTATUS KeWaitForMultipleObjects(ULONG Count, PVOID Object[], WAIT_TYPE WaitType, KWAIT_REASON, KPROCESSOR_MODE,
                                  BOOLEAN, PLARGE_INTEGER Timeout, PKWAIT_BLOCK WaitBlockArray) {
    if (Count == 0 || Count > MAXIMUM_WAIT_OBJECTS || (Count > THREAD_WAIT_OBJECTS && WaitBlockArray == nullptr)) {
        Report("MAXIMUM_WAIT_OBJECTS_EXCEEDED", 0x0C, "KeWaitForMultipleObjects",
               "Count %u needs 1 ... %u objects and a WaitBlockArray above %u", Count, MAXIMUM_WAIT_OBJECTS,
               THREAD_WAIT_OBJECTS);
        return STATUS_INVALID_PARAMETER;
    }
    return Wait(Count, Object, WaitType, Timeout, "KeWaitForMultipleObjects");
}

NTSTATUS KeDelayExecutionThread(KPROCESSOR_MODE, BOOLEAN, PLARGE_INTEGER Interval) {
    RequireIrqlAtMost(APC_LEVEL, "KeDelayExecutionThread");
    if (Interval == nullptr) return STATUS_INVALID_PARAMETER;
    Clock::time_point deadline;
    Deadline(Interval, &deadline);
    std::this_thread::sleep_until(deadline);
    return STATUS_SUCCESS;
}

VOID KeStallExecutionProcessor(ULONG MicroSeconds) {
    auto until = Clock::now() + std::chrono::microseconds(MicroSeconds);
    while (Clock::now() < until) YieldProcessor();
}

// ---- DPCs ----
VOID KeInitializeDpc(PRKDPC Dpc, PKDEFERRED_ROUTINE DeferredRoutine, PVOID DeferredContext) {
    std::memset(Dpc, 0, sizeof(*Dpc));
    Dpc->Type = 0x13;
    Dpc->DeferredRoutine = DeferredRoutine;
    Dpc->DeferredContext = DeferredContext;
}

BOOLEAN KeInsertQueueDpc(PRKDPC Dpc, PVOID SystemArgument1, PVOID SystemArgument2) {
    StartDpcThread();
    DpcQueue& dpcs = Dpcs();
    {
        std::lock_guard lock(dpcs.mutex);
        if (Dpc->DpcData != nullptr) return FALSE;
        Dpc->SystemArgument1 = SystemArgument1;
        Dpc->SystemArgument2 = SystemArgument2;
        Dpc->DpcData = Dpc;
        dpcs.queue.push_back(Dpc);
    }
    dpcs.wake.notify_one();
    return TRUE;
}

BOOLEAN KeRemoveQueueDpc(PRKDPC Dpc) {
    DpcQueue& dpcs = Dpcs();
    std::lock_guard lock(dpcs.mutex);
    if (Dpc->DpcData == nullptr) return FALSE;
    for (auto it = dpcs.queue.begin(); it != dpcs.queue.end(); ++it)
        if (*it == Dpc) {
            dpcs.queue.erase(it);
            break;
        }
    Dpc->DpcData = nullptr;
    return TRUE;
}

VOID KeFlushQueuedDpcs(void) {
    RequireIrqlAtMost(PASSIVE_LEVEL, "KeFlushQueuedDpcs");
    DpcQueue& dpcs = Dpcs();
    if (std::this_thread::get_id() == dpcs.thread_id) return;  // reported above: the DPC thread is at DISPATCH
    std::unique_lock lock(dpcs.mutex);
    dpcs.idle.wait(lock, [&] { return dpcs.queue.empty() && dpcs.running == 0; });
}

// ---- timers ----
VOID KeInitializeTimerEx(PKTIMER Timer, TIMER_TYPE Type) {
    std::memset(Timer, 0, sizeof(*Timer));
    Timer->Header.Type = Type == SynchronizationTimer ? kSynchronizationTimer : kNotificationTimer;
    InitializeListHead(&Timer->Header.WaitListHead);
    InitializeListHead(&Timer->TimerListEntry);
}
VOID KeInitializeTimer(PKTIMER Timer) {
    KeInitializeTimerEx(Timer, NotificationTimer);
}

BOOLEAN KeSetTimerEx(PKTIMER Timer, LARGE_INTEGER DueTime, LONG Period, PKDPC Dpc) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "KeSetTimerEx");
    StartTimerThread();
    Clock::time_point deadline;
    Deadline(&DueTime, &deadline);
    BOOLEAN was_armed;
    {
        std::lock_guard lock(DispatcherMutex());
        was_armed = Disarm(Timer) ? TRUE : FALSE;
        Timer->Header.SignalState = 0;
        Timer->Header.Inserted = TRUE;
        Timer->Period = Period;
        Timer->Dpc = Dpc;
        Timers().where[Timer] = Timers().due.emplace(deadline, Timer);
    }
    Timers().wake.notify_all();
    return was_armed;
}
BOOLEAN KeSetTimer(PKTIMER Timer, LARGE_INTEGER DueTime, PKDPC Dpc) {
    return KeSetTimerEx(Timer, DueTime, 0, Dpc);
}

BOOLEAN KeCancelTimer(PKTIMER Timer) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "KeCancelTimer");
    std::lock_guard lock(DispatcherMutex());
    return Disarm(Timer) ? TRUE : FALSE;
}

BOOLEAN KeReadStateTimer(PKTIMER Timer) {
    std::lock_guard lock(DispatcherMutex());
    return Timer->Header.SignalState > 0 ? TRUE : FALSE;
}

// ---- clocks (10 MHz performance counter, as on current Windows) ----
LARGE_INTEGER KeQueryPerformanceCounter(PLARGE_INTEGER PerformanceFrequency) {
    if (PerformanceFrequency != nullptr) PerformanceFrequency->QuadPart = 10000000;
    LARGE_INTEGER value;
    value.QuadPart =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count() / 100;
    return value;
}
VOID KeQuerySystemTime(PLARGE_INTEGER CurrentTime) {
    CurrentTime->QuadPart = SystemTime100ns();
}
VOID KeQuerySystemTimePrecise(PLARGE_INTEGER CurrentTime) {
    CurrentTime->QuadPart = SystemTime100ns();
}
ULONGLONG KeQueryInterruptTime(void) {
    return static_cast<ULONGLONG>(KeQueryPerformanceCounter(nullptr).QuadPart);
}
ULONG KeQueryTimeIncrement(void) {
    return 156250;
}  // 15.625 ms in 100 ns units
VOID KeQueryTickCount(PLARGE_INTEGER TickCount) {
    TickCount->QuadPart = static_cast<LONGLONG>(KeQueryInterruptTime() / KeQueryTimeIncrement());
}

ULONG KeGetCurrentProcessorNumber(void) {
    int cpu = sched_getcpu();
    return cpu < 0 ? 0 : static_cast<ULONG>(cpu);
}
ULONG KeGetCurrentProcessorNumberEx(PPROCESSOR_NUMBER ProcNumber) {
    ULONG cpu = KeGetCurrentProcessorNumber();
    if (ProcNumber != nullptr) *ProcNumber = PROCESSOR_NUMBER{0, static_cast<UCHAR>(cpu), 0};
    return cpu;
}
ULONG KeQueryActiveProcessorCount(PKAFFINITY ActiveProcessors) {
    ULONG count = std::thread::hardware_concurrency();
    if (count == 0) count = 1;
    if (ActiveProcessors != nullptr) *ActiveProcessors = count >= 64 ? ~KAFFINITY{0} : (KAFFINITY{1} << count) - 1;
    return count;
}
ULONG KeQueryActiveProcessorCountEx(USHORT) {
    return KeQueryActiveProcessorCount(nullptr);
}

}  // extern "C"
