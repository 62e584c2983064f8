// Spin locks (classic and in-stack queued), interlocked lists, fast mutexes and rundown protection
// (issue 9 §2). A spin lock word holds its owner's thread token, so acquiring one twice on a thread and
// releasing one the thread does not hold are reported (bug checks 0x0F / 0x10) instead of hanging.
#include <sched.h>

#include <cstring>

#include "km/km_internal.h"

namespace softndk::km {
namespace {

thread_local char t_token;  // its address identifies the thread
ULONG_PTR Me() {
    return reinterpret_cast<ULONG_PTR>(&t_token);
}

void Spin(PKSPIN_LOCK lock, const char* call) {
    ULONG_PTR expected = 0;
    if (__atomic_load_n(lock, __ATOMIC_RELAXED) == Me()) {
        Report("SPIN_LOCK_ALREADY_OWNED", kSpinLockAlreadyOwned, call, "spin lock %p is already held by this thread",
               static_cast<void*>(lock));
        return;  // log mode: treat as held, so the matching release balances
    }
    for (unsigned spins = 0;; ++spins) {
        expected = 0;
        if (__atomic_compare_exchange_n(lock, &expected, Me(), false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
        if (spins < 64) {
            YieldProcessor();
        } else {
            sched_yield();  // a user-mode holder can be preempted; a kernel one could not
        }
    }
}

void Unspin(PKSPIN_LOCK lock, const char* call) {
    if (__atomic_load_n(lock, __ATOMIC_RELAXED) != Me()) {
        Report("SPIN_LOCK_NOT_OWNED", kSpinLockNotOwned, call, "spin lock %p is not held by this thread",
               static_cast<void*>(lock));
        return;
    }
    __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

void RequireAtLeastDispatch(const char* call) {
    if (CurrentIrql() < DISPATCH_LEVEL)
        Report("IRQL_NOT_GREATER_OR_EQUAL", kIrqlNotGreaterOrEqual, call, "%s requires DISPATCH_LEVEL", call);
}

}  // namespace
}  // namespace softndk::km

using namespace softndk::km;

extern "C" {

VOID KeInitializeSpinLock(PKSPIN_LOCK SpinLock) {
    __atomic_store_n(SpinLock, 0, __ATOMIC_RELEASE);
}

KIRQL KeAcquireSpinLockRaiseToDpc(PKSPIN_LOCK SpinLock) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "KeAcquireSpinLock");
    KIRQL old = CurrentIrql();
    SetIrql(DISPATCH_LEVEL);
    Spin(SpinLock, "KeAcquireSpinLock");
    return old;
}

VOID KeReleaseSpinLock(PKSPIN_LOCK SpinLock, KIRQL NewIrql) {
    Unspin(SpinLock, "KeReleaseSpinLock");
    KeLowerIrql(NewIrql);
}

VOID KeAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock) {
    RequireAtLeastDispatch("KeAcquireSpinLockAtDpcLevel");
    Spin(SpinLock, "KeAcquireSpinLockAtDpcLevel");
}

VOID KeReleaseSpinLockFromDpcLevel(PKSPIN_LOCK SpinLock) {
    RequireAtLeastDispatch("KeReleaseSpinLockFromDpcLevel");
    Unspin(SpinLock, "KeReleaseSpinLockFromDpcLevel");
}

BOOLEAN KeTryToAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock) {
    RequireAtLeastDispatch("KeTryToAcquireSpinLockAtDpcLevel");
    ULONG_PTR expected = 0;
    return __atomic_compare_exchange_n(SpinLock, &expected, Me(), false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED) ? TRUE
                                                                                                             : FALSE;
}

VOID KeAcquireInStackQueuedSpinLock(PKSPIN_LOCK SpinLock, PKLOCK_QUEUE_HANDLE LockHandle) {
    LockHandle->LockQueue.Lock = SpinLock;
    LockHandle->LockQueue.Next = nullptr;
    LockHandle->OldIrql = KeAcquireSpinLockRaiseToDpc(SpinLock);
}

VOID KeReleaseInStackQueuedSpinLock(PKLOCK_QUEUE_HANDLE LockHandle) {
    KeReleaseSpinLock(LockHandle->LockQueue.Lock, LockHandle->OldIrql);
}

VOID KeAcquireInStackQueuedSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock, PKLOCK_QUEUE_HANDLE LockHandle) {
    LockHandle->LockQueue.Lock = SpinLock;
    LockHandle->LockQueue.Next = nullptr;
    KeAcquireSpinLockAtDpcLevel(SpinLock);
}

VOID KeReleaseInStackQueuedSpinLockFromDpcLevel(PKLOCK_QUEUE_HANDLE LockHandle) {
    KeReleaseSpinLockFromDpcLevel(LockHandle->LockQueue.Lock);
}

// ---- interlocked lists ----
PLIST_ENTRY ExInterlockedInsertHeadList(PLIST_ENTRY ListHead, PLIST_ENTRY ListEntry, PKSPIN_LOCK Lock) {
    KIRQL old = KeAcquireSpinLockRaiseToDpc(Lock);
    PLIST_ENTRY first = IsListEmpty(ListHead) ? nullptr : ListHead->Flink;
    InsertHeadList(ListHead, ListEntry);
    KeReleaseSpinLock(Lock, old);
    return first;
}
PLIST_ENTRY ExInterlockedInsertTailList(PLIST_ENTRY ListHead, PLIST_ENTRY ListEntry, PKSPIN_LOCK Lock) {
    KIRQL old = KeAcquireSpinLockRaiseToDpc(Lock);
    PLIST_ENTRY last = IsListEmpty(ListHead) ? nullptr : ListHead->Blink;
    InsertTailList(ListHead, ListEntry);
    KeReleaseSpinLock(Lock, old);
    return last;
}
PLIST_ENTRY ExInterlockedRemoveHeadList(PLIST_ENTRY ListHead, PKSPIN_LOCK Lock) {
    KIRQL old = KeAcquireSpinLockRaiseToDpc(Lock);
    PLIST_ENTRY entry = IsListEmpty(ListHead) ? nullptr : RemoveHeadList(ListHead);
    KeReleaseSpinLock(Lock, old);
    return entry;
}
PSINGLE_LIST_ENTRY ExInterlockedPushEntryList(PSINGLE_LIST_ENTRY ListHead, PSINGLE_LIST_ENTRY ListEntry,
                                              PKSPIN_LOCK Lock) {
    KIRQL old = KeAcquireSpinLockRaiseToDpc(Lock);
    PSINGLE_LIST_ENTRY first = ListHead->Next;
    PushEntryList(ListHead, ListEntry);
    KeReleaseSpinLock(Lock, old);
    return first;
}
PSINGLE_LIST_ENTRY ExInterlockedPopEntryList(PSINGLE_LIST_ENTRY ListHead, PKSPIN_LOCK Lock) {
    KIRQL old = KeAcquireSpinLockRaiseToDpc(Lock);
    PSINGLE_LIST_ENTRY entry = PopEntryList(ListHead);
    KeReleaseSpinLock(Lock, old);
    return entry;
}

// ---- fast mutexes: raise to APC_LEVEL; waiting needs IRQL <= APC_LEVEL ----
VOID ExInitializeFastMutex(PFAST_MUTEX FastMutex) {
    std::memset(FastMutex, 0, sizeof(*FastMutex));
    KeInitializeEvent(&FastMutex->Event, SynchronizationEvent, FALSE);
}

VOID ExAcquireFastMutexUnsafe(PFAST_MUTEX FastMutex) {
    std::unique_lock lock(DispatcherMutex());
    if (FastMutex->Owner == reinterpret_cast<PVOID>(Me())) {
        lock.unlock();
        Report("FAST_MUTEX_RECURSION", kDriverVerifierDetectedViolation, "ExAcquireFastMutex",
               "fast mutex %p is already owned by this thread (it would deadlock)", static_cast<void*>(FastMutex));
        return;
    }
    if (FastMutex->Count != 0) ++FastMutex->Contention;
    DispatcherCondition().wait(lock, [FastMutex] { return FastMutex->Count == 0; });
    FastMutex->Count = 1;
    FastMutex->Owner = reinterpret_cast<PVOID>(Me());
}

VOID ExReleaseFastMutexUnsafe(PFAST_MUTEX FastMutex) {
    std::unique_lock lock(DispatcherMutex());
    if (FastMutex->Owner != reinterpret_cast<PVOID>(Me())) {
        lock.unlock();
        Report("FAST_MUTEX_NOT_OWNED", kDriverVerifierDetectedViolation, "ExReleaseFastMutex",
               "fast mutex %p is released by a thread that does not own it", static_cast<void*>(FastMutex));
        return;
    }
    FastMutex->Owner = nullptr;
    FastMutex->Count = 0;
    DispatcherCondition().notify_all();
}

VOID ExAcquireFastMutex(PFAST_MUTEX FastMutex) {
    RequireIrqlAtMost(APC_LEVEL, "ExAcquireFastMutex");
    KIRQL old = CurrentIrql();
    ExAcquireFastMutexUnsafe(FastMutex);
    FastMutex->OldIrql = old;
    SetIrql(APC_LEVEL);
}

VOID ExReleaseFastMutex(PFAST_MUTEX FastMutex) {
    KIRQL old = static_cast<KIRQL>(FastMutex->OldIrql);
    ExReleaseFastMutexUnsafe(FastMutex);
    SetIrql(old);
}

BOOLEAN ExTryToAcquireFastMutex(PFAST_MUTEX FastMutex) {
    RequireIrqlAtMost(APC_LEVEL, "ExTryToAcquireFastMutex");
    std::lock_guard lock(DispatcherMutex());
    if (FastMutex->Count != 0) return FALSE;
    FastMutex->Count = 1;
    FastMutex->Owner = reinterpret_cast<PVOID>(Me());
    FastMutex->OldIrql = CurrentIrql();
    SetIrql(APC_LEVEL);
    return TRUE;
}

// ---- rundown protection: Count = 2 x references | rundown-started bit ----
VOID ExInitializeRundownProtection(PEX_RUNDOWN_REF RunRef) {
    __atomic_store_n(&RunRef->Count, 0, __ATOMIC_RELEASE);
}
VOID ExReInitializeRundownProtection(PEX_RUNDOWN_REF RunRef) {
    ExInitializeRundownProtection(RunRef);
}

BOOLEAN ExAcquireRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count) {
    ULONG_PTR value = __atomic_load_n(&RunRef->Count, __ATOMIC_RELAXED);
    do {
        if (value & 1) return FALSE;
    } while (!__atomic_compare_exchange_n(&RunRef->Count, &value, value + 2 * static_cast<ULONG_PTR>(Count), true,
                                          __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
    return TRUE;
}
BOOLEAN ExAcquireRundownProtection(PEX_RUNDOWN_REF RunRef) {
    return ExAcquireRundownProtectionEx(RunRef, 1);
}

VOID ExReleaseRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count) {
    ULONG_PTR after = __atomic_sub_fetch(&RunRef->Count, 2 * static_cast<ULONG_PTR>(Count), __ATOMIC_RELEASE);
    if (after == 1) {  // the last reference of a rundown in progress
        std::lock_guard lock(DispatcherMutex());
        DispatcherCondition().notify_all();
    }
}
VOID ExReleaseRundownProtection(PEX_RUNDOWN_REF RunRef) {
    ExReleaseRundownProtectionEx(RunRef, 1);
}

VOID ExWaitForRundownProtectionRelease(PEX_RUNDOWN_REF RunRef) {
    RequireIrqlAtMost(APC_LEVEL, "ExWaitForRundownProtectionRelease");
    __atomic_fetch_or(&RunRef->Count, ULONG_PTR{1}, __ATOMIC_ACQ_REL);
    std::unique_lock lock(DispatcherMutex());
    DispatcherCondition().wait(lock, [RunRef] { return __atomic_load_n(&RunRef->Count, __ATOMIC_ACQUIRE) == 1; });
}

VOID ExRundownCompleted(PEX_RUNDOWN_REF RunRef) {
    __atomic_store_n(&RunRef->Count, 1, __ATOMIC_RELEASE);
}

}  // extern "C"
