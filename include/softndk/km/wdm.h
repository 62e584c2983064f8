/* softndk kernel layer — wdm.h: the kernel primitives NDK consumer drivers use, with their WDK names
 * (issue 9 §2). The MDL routines come from softndk/wdm.h (user-mode memory manager) and are reused, not
 * redefined; the pool routines are routed through the kernel layer so tags are tracked and leaks reported.
 * Every routine is implemented in src/km (libsoftndk_km) and checks its IRQL rule like Driver Verifier. */
#ifndef SOFTNDK_KM_WDM_H
#define SOFTNDK_KM_WDM_H

#include <softndk/km/ntdef.h>
#include <softndk/wdm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- IRQL (per thread; provider callbacks run at DISPATCH_LEVEL) ---- */
#define PASSIVE_LEVEL 0
#define LOW_LEVEL 0
#define APC_LEVEL 1
#define DISPATCH_LEVEL 2
#define HIGH_LEVEL 15
SOFTNDK_KM_API KIRQL KeGetCurrentIrql(void);
SOFTNDK_KM_API KIRQL KfRaiseIrql(KIRQL NewIrql);
SOFTNDK_KM_API VOID KeLowerIrql(KIRQL NewIrql);
SOFTNDK_KM_API KIRQL KeRaiseIrqlToDpcLevel(void);
#define KeRaiseIrql(NewIrql, OldIrql) (*(OldIrql) = KfRaiseIrql(NewIrql))

/* ---- bug checks and assertions ---- */
SOFTNDK_KM_API DECLSPEC_NORETURN VOID KeBugCheckEx(ULONG BugCheckCode, ULONG_PTR P1, ULONG_PTR P2, ULONG_PTR P3,
                                                   ULONG_PTR P4);
SOFTNDK_KM_API DECLSPEC_NORETURN VOID KeBugCheck(ULONG BugCheckCode);
SOFTNDK_KM_API VOID SoftNdkKmAssertionFailed(const char* Expression, const char* File, int Line);
SOFTNDK_KM_API VOID SoftNdkKmPagedCode(const char* Function);
#define NT_ASSERT(e) ((e) ? (void)0 : SoftNdkKmAssertionFailed(#e, __FILE__, __LINE__))
#define NT_ASSERTMSG(msg, e) ((e) ? (void)0 : SoftNdkKmAssertionFailed(msg, __FILE__, __LINE__))
#define NT_VERIFY(e) ((e) ? TRUE : (SoftNdkKmAssertionFailed(#e, __FILE__, __LINE__), FALSE))
#define NT_FRE_ASSERT(e) NT_ASSERT(e)
#if DBG
#define ASSERT(e) NT_ASSERT(e)
#define ASSERTMSG(msg, e) NT_ASSERTMSG(msg, e)
#else
#define ASSERT(e) ((void)0)
#define ASSERTMSG(msg, e) ((void)0)
#endif
/* PAGED_CODE: the caller must be below DISPATCH_LEVEL (checked in every build, as Verifier does). */
#define PAGED_CODE() SoftNdkKmPagedCode(__func__)
#define PAGED_CODE_LOCKED() ((void)0)
#define INIT_CODE() ((void)0)

/* ---- debug output ---- */
#define DPFLTR_ERROR_LEVEL 0
#define DPFLTR_WARNING_LEVEL 1
#define DPFLTR_TRACE_LEVEL 2
#define DPFLTR_INFO_LEVEL 3
#define DPFLTR_MASK 0x80000000
#define DPFLTR_IHVNETWORK_ID 79
#define DPFLTR_IHVDRIVER_ID 80
#define DPFLTR_DEFAULT_ID 101
SOFTNDK_KM_API ULONG DbgPrint(PCSTR Format, ...) __attribute__((format(printf, 1, 2)));
SOFTNDK_KM_API ULONG DbgPrintEx(ULONG ComponentId, ULONG Level, PCSTR Format, ...)
    __attribute__((format(printf, 3, 4)));
SOFTNDK_KM_API ULONG vDbgPrintEx(ULONG ComponentId, ULONG Level, PCCH Format, va_list Arguments);
#if DBG
#define KdPrint(args) DbgPrint args
#define KdPrintEx(args) DbgPrintEx args
#else
#define KdPrint(args) ((void)0)
#define KdPrintEx(args) ((void)0)
#endif
#define KdBreakPoint() ((void)0)
#define DbgBreakPoint() ((void)0)

/* ---- memory and byte order (Rtl) ---- */
#define RtlCopyMemory(d, s, n) memcpy((d), (s), (n))
#define RtlMoveMemory(d, s, n) memmove((d), (s), (n))
#define RtlFillMemory(d, n, f) memset((d), (f), (n))
#define RtlZeroMemory(d, n) memset((d), 0, (n))
#define RtlSecureZeroMemory(d, n) memset((d), 0, (n))
#define RtlEqualMemory(a, b, n) (memcmp((a), (b), (n)) == 0)
SOFTNDK_KM_API SIZE_T RtlCompareMemory(const VOID* Source1, const VOID* Source2, SIZE_T Length);
#define RtlUshortByteSwap(x) ((USHORT)__builtin_bswap16((USHORT)(x)))
#define RtlUlongByteSwap(x) ((ULONG)__builtin_bswap32((ULONG)(x)))
#define RtlUlonglongByteSwap(x) ((ULONGLONG)__builtin_bswap64((ULONGLONG)(x)))

/* ---- Unicode and ANSI strings (lengths in bytes; WCHAR = wchar_t) ---- */
SOFTNDK_KM_API VOID RtlInitUnicodeString(PUNICODE_STRING DestinationString, PCWSTR SourceString);
SOFTNDK_KM_API VOID RtlInitAnsiString(PANSI_STRING DestinationString, PCSTR SourceString);
SOFTNDK_KM_API VOID RtlInitString(PSTRING DestinationString, PCSTR SourceString);
SOFTNDK_KM_API VOID RtlCopyUnicodeString(PUNICODE_STRING DestinationString, PCUNICODE_STRING SourceString);
SOFTNDK_KM_API NTSTATUS RtlAppendUnicodeToString(PUNICODE_STRING Destination, PCWSTR Source);
SOFTNDK_KM_API NTSTATUS RtlAppendUnicodeStringToString(PUNICODE_STRING Destination, PCUNICODE_STRING Source);
SOFTNDK_KM_API LONG RtlCompareUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2,
                                            BOOLEAN CaseInSensitive);
SOFTNDK_KM_API BOOLEAN RtlEqualUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2,
                                             BOOLEAN CaseInSensitive);
SOFTNDK_KM_API NTSTATUS RtlUnicodeStringToAnsiString(PANSI_STRING DestinationString, PCUNICODE_STRING SourceString,
                                                     BOOLEAN AllocateDestinationString);
SOFTNDK_KM_API NTSTATUS RtlAnsiStringToUnicodeString(PUNICODE_STRING DestinationString, PCANSI_STRING SourceString,
                                                     BOOLEAN AllocateDestinationString);
SOFTNDK_KM_API VOID RtlFreeUnicodeString(PUNICODE_STRING UnicodeString);
SOFTNDK_KM_API VOID RtlFreeAnsiString(PANSI_STRING AnsiString);
SOFTNDK_KM_API NTSTATUS RtlUnicodeStringToInteger(PCUNICODE_STRING String, ULONG Base, PULONG Value);

/* ---- registry: read a driver's parameters (a key store the host fills: softndk-kmhost --parameter) ---- */
#define KEY_QUERY_VALUE (0x0001)
#define KEY_ENUMERATE_SUB_KEYS (0x0008)
#define KEY_NOTIFY (0x0010)
#define READ_CONTROL (0x00020000L)
#define KEY_READ (READ_CONTROL | KEY_QUERY_VALUE | KEY_ENUMERATE_SUB_KEYS | KEY_NOTIFY)
#define REG_NONE (0)
#define REG_SZ (1)
#define REG_EXPAND_SZ (2)
#define REG_BINARY (3)
#define REG_DWORD (4)
#define REG_MULTI_SZ (7)
#define REG_QWORD (11)
typedef enum _KEY_VALUE_INFORMATION_CLASS {
    KeyValueBasicInformation,
    KeyValueFullInformation,
    KeyValuePartialInformation /* the one emulated */
} KEY_VALUE_INFORMATION_CLASS;
typedef struct _KEY_VALUE_PARTIAL_INFORMATION {
    ULONG TitleIndex;
    ULONG Type;
    ULONG DataLength;
    UCHAR Data[1];
} KEY_VALUE_PARTIAL_INFORMATION, *PKEY_VALUE_PARTIAL_INFORMATION;
SOFTNDK_KM_API NTSTATUS ZwOpenKey(PHANDLE KeyHandle, ACCESS_MASK DesiredAccess, POBJECT_ATTRIBUTES ObjectAttributes);
SOFTNDK_KM_API NTSTATUS ZwQueryValueKey(HANDLE KeyHandle, PUNICODE_STRING ValueName,
                                        KEY_VALUE_INFORMATION_CLASS KeyValueInformationClass, PVOID KeyValueInformation,
                                        ULONG Length, PULONG ResultLength);
SOFTNDK_KM_API NTSTATUS ZwClose(HANDLE Handle); /* registry key handles: the only handles there are */

/* ---- lists (inline, with the fast-fail link checks of current WDKs) ---- */
SOFTNDK_KM_API DECLSPEC_NORETURN VOID SoftNdkKmListCorrupt(PLIST_ENTRY Entry);
FORCEINLINE VOID InitializeListHead(PLIST_ENTRY ListHead) {
    ListHead->Flink = ListHead->Blink = ListHead;
}
FORCEINLINE BOOLEAN IsListEmpty(const LIST_ENTRY* ListHead) {
    return (BOOLEAN)(ListHead->Flink == ListHead);
}
FORCEINLINE VOID SoftNdkKmCheckListEntry(PLIST_ENTRY Entry) {
    if (Entry->Flink->Blink != Entry || Entry->Blink->Flink != Entry) SoftNdkKmListCorrupt(Entry);
}
FORCEINLINE BOOLEAN RemoveEntryList(PLIST_ENTRY Entry) {
    SoftNdkKmCheckListEntry(Entry);
    PLIST_ENTRY next = Entry->Flink, previous = Entry->Blink;
    previous->Flink = next;
    next->Blink = previous;
    return (BOOLEAN)(next == previous);
}
FORCEINLINE PLIST_ENTRY RemoveHeadList(PLIST_ENTRY ListHead) {
    PLIST_ENTRY entry = ListHead->Flink;
    RemoveEntryList(entry);
    return entry;
}
FORCEINLINE PLIST_ENTRY RemoveTailList(PLIST_ENTRY ListHead) {
    PLIST_ENTRY entry = ListHead->Blink;
    RemoveEntryList(entry);
    return entry;
}
FORCEINLINE VOID InsertTailList(PLIST_ENTRY ListHead, PLIST_ENTRY Entry) {
    PLIST_ENTRY last = ListHead->Blink;
    if (last->Flink != ListHead) SoftNdkKmListCorrupt(ListHead);
    Entry->Flink = ListHead;
    Entry->Blink = last;
    last->Flink = Entry;
    ListHead->Blink = Entry;
}
FORCEINLINE VOID InsertHeadList(PLIST_ENTRY ListHead, PLIST_ENTRY Entry) {
    PLIST_ENTRY first = ListHead->Flink;
    if (first->Blink != ListHead) SoftNdkKmListCorrupt(ListHead);
    Entry->Flink = first;
    Entry->Blink = ListHead;
    first->Blink = Entry;
    ListHead->Flink = Entry;
}
FORCEINLINE VOID AppendTailList(PLIST_ENTRY ListHead, PLIST_ENTRY ListToAppend) {
    PLIST_ENTRY end = ListHead->Blink;
    ListHead->Blink->Flink = ListToAppend;
    ListHead->Blink = ListToAppend->Blink;
    ListToAppend->Blink->Flink = ListHead;
    ListToAppend->Blink = end;
}
FORCEINLINE PSINGLE_LIST_ENTRY PopEntryList(PSINGLE_LIST_ENTRY ListHead) {
    PSINGLE_LIST_ENTRY first = ListHead->Next;
    if (first != NULL) ListHead->Next = first->Next;
    return first;
}
FORCEINLINE VOID PushEntryList(PSINGLE_LIST_ENTRY ListHead, PSINGLE_LIST_ENTRY Entry) {
    Entry->Next = ListHead->Next;
    ListHead->Next = Entry;
}

/* ---- interlocked operations (sequentially consistent, like the x64 intrinsics) ---- */
#define SOFTNDK_ATOMIC __ATOMIC_SEQ_CST
FORCEINLINE LONG InterlockedIncrement(LONG volatile* a) {
    return __atomic_add_fetch(a, 1, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG InterlockedDecrement(LONG volatile* a) {
    return __atomic_sub_fetch(a, 1, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG InterlockedExchange(LONG volatile* a, LONG v) {
    return __atomic_exchange_n(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG InterlockedExchangeAdd(LONG volatile* a, LONG v) {
    return __atomic_fetch_add(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG InterlockedAdd(LONG volatile* a, LONG v) {
    return __atomic_add_fetch(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG InterlockedOr(LONG volatile* a, LONG v) {
    return __atomic_fetch_or(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG InterlockedAnd(LONG volatile* a, LONG v) {
    return __atomic_fetch_and(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG InterlockedXor(LONG volatile* a, LONG v) {
    return __atomic_fetch_xor(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG InterlockedCompareExchange(LONG volatile* a, LONG exchange, LONG comparand) {
    __atomic_compare_exchange_n(a, &comparand, exchange, 0, SOFTNDK_ATOMIC, SOFTNDK_ATOMIC);
    return comparand;
}
FORCEINLINE LONG64 InterlockedIncrement64(LONG64 volatile* a) {
    return __atomic_add_fetch(a, 1, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG64 InterlockedDecrement64(LONG64 volatile* a) {
    return __atomic_sub_fetch(a, 1, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG64 InterlockedExchange64(LONG64 volatile* a, LONG64 v) {
    return __atomic_exchange_n(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG64 InterlockedExchangeAdd64(LONG64 volatile* a, LONG64 v) {
    return __atomic_fetch_add(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG64 InterlockedAdd64(LONG64 volatile* a, LONG64 v) {
    return __atomic_add_fetch(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE LONG64 InterlockedCompareExchange64(LONG64 volatile* a, LONG64 exchange, LONG64 comparand) {
    __atomic_compare_exchange_n(a, &comparand, exchange, 0, SOFTNDK_ATOMIC, SOFTNDK_ATOMIC);
    return comparand;
}
FORCEINLINE PVOID InterlockedExchangePointer(PVOID volatile* a, PVOID v) {
    return __atomic_exchange_n(a, v, SOFTNDK_ATOMIC);
}
FORCEINLINE PVOID InterlockedCompareExchangePointer(PVOID volatile* a, PVOID exchange, PVOID comparand) {
    __atomic_compare_exchange_n(a, &comparand, exchange, 0, SOFTNDK_ATOMIC, SOFTNDK_ATOMIC);
    return comparand;
}
#define InterlockedIncrementNoFence InterlockedIncrement
#define InterlockedDecrementNoFence InterlockedDecrement
#define InterlockedIncrementAcquire InterlockedIncrement
#define InterlockedDecrementRelease InterlockedDecrement
#define ReadNoFence(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define WriteNoFence(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ReadAcquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define WriteRelease(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define KeMemoryBarrier() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define MemoryBarrier() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define YieldProcessor() __builtin_ia32_pause()

/* ---- spin locks: raise to DISPATCH_LEVEL; recursion and foreign release are Verifier reports ---- */
typedef ULONG_PTR KSPIN_LOCK, *PKSPIN_LOCK;
typedef struct _KSPIN_LOCK_QUEUE {
    struct _KSPIN_LOCK_QUEUE* volatile Next;
    PKSPIN_LOCK volatile Lock;
} KSPIN_LOCK_QUEUE, *PKSPIN_LOCK_QUEUE;
typedef struct _KLOCK_QUEUE_HANDLE {
    KSPIN_LOCK_QUEUE LockQueue;
    KIRQL OldIrql;
} KLOCK_QUEUE_HANDLE, *PKLOCK_QUEUE_HANDLE;
SOFTNDK_KM_API VOID KeInitializeSpinLock(PKSPIN_LOCK SpinLock);
SOFTNDK_KM_API KIRQL KeAcquireSpinLockRaiseToDpc(PKSPIN_LOCK SpinLock);
SOFTNDK_KM_API VOID KeReleaseSpinLock(PKSPIN_LOCK SpinLock, KIRQL NewIrql);
SOFTNDK_KM_API VOID KeAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock);
SOFTNDK_KM_API VOID KeReleaseSpinLockFromDpcLevel(PKSPIN_LOCK SpinLock);
SOFTNDK_KM_API BOOLEAN KeTryToAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock);
SOFTNDK_KM_API VOID KeAcquireInStackQueuedSpinLock(PKSPIN_LOCK SpinLock, PKLOCK_QUEUE_HANDLE LockHandle);
SOFTNDK_KM_API VOID KeReleaseInStackQueuedSpinLock(PKLOCK_QUEUE_HANDLE LockHandle);
SOFTNDK_KM_API VOID KeAcquireInStackQueuedSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock, PKLOCK_QUEUE_HANDLE LockHandle);
SOFTNDK_KM_API VOID KeReleaseInStackQueuedSpinLockFromDpcLevel(PKLOCK_QUEUE_HANDLE LockHandle);
#define KeAcquireSpinLock(SpinLock, OldIrql) (*(OldIrql) = KeAcquireSpinLockRaiseToDpc(SpinLock))

SOFTNDK_KM_API PLIST_ENTRY ExInterlockedInsertHeadList(PLIST_ENTRY ListHead, PLIST_ENTRY ListEntry, PKSPIN_LOCK Lock);
SOFTNDK_KM_API PLIST_ENTRY ExInterlockedInsertTailList(PLIST_ENTRY ListHead, PLIST_ENTRY ListEntry, PKSPIN_LOCK Lock);
SOFTNDK_KM_API PLIST_ENTRY ExInterlockedRemoveHeadList(PLIST_ENTRY ListHead, PKSPIN_LOCK Lock);
SOFTNDK_KM_API PSINGLE_LIST_ENTRY ExInterlockedPushEntryList(PSINGLE_LIST_ENTRY ListHead, PSINGLE_LIST_ENTRY ListEntry,
                                                             PKSPIN_LOCK Lock);
SOFTNDK_KM_API PSINGLE_LIST_ENTRY ExInterlockedPopEntryList(PSINGLE_LIST_ENTRY ListHead, PKSPIN_LOCK Lock);

/* ---- dispatcher objects: events, semaphores, timers; waits with timeouts ---- */
typedef enum _EVENT_TYPE { NotificationEvent = 0, SynchronizationEvent = 1 } EVENT_TYPE;
typedef enum _TIMER_TYPE { NotificationTimer = 0, SynchronizationTimer = 1 } TIMER_TYPE;
typedef enum _WAIT_TYPE { WaitAll = 0, WaitAny = 1 } WAIT_TYPE;
typedef enum _KWAIT_REASON {
    Executive = 0,
    FreePage,
    PageIn,
    PoolAllocation,
    DelayExecution,
    Suspended,
    UserRequest,
    WrExecutive
} KWAIT_REASON;
#define IO_NO_INCREMENT 0
#define IO_NETWORK_INCREMENT 2
#define EVENT_INCREMENT 1
#define SEMAPHORE_INCREMENT 1
#define THREAD_WAIT_OBJECTS 3
#define MAXIMUM_WAIT_OBJECTS 64

/* Every dispatcher object starts with this header (Type tells the waiter how to test and satisfy it). */
typedef struct _DISPATCHER_HEADER {
    UCHAR Type;
    UCHAR Absolute;
    UCHAR Size;
    UCHAR Inserted;
    volatile LONG SignalState;
    LIST_ENTRY WaitListHead;
} DISPATCHER_HEADER;
typedef struct _KEVENT {
    DISPATCHER_HEADER Header;
} KEVENT, *PKEVENT, *PRKEVENT;
typedef struct _KSEMAPHORE {
    DISPATCHER_HEADER Header;
    LONG Limit;
} KSEMAPHORE, *PKSEMAPHORE, *PRKSEMAPHORE;
typedef struct _KWAIT_BLOCK {
    PVOID Reserved[6];
} KWAIT_BLOCK, *PKWAIT_BLOCK;

SOFTNDK_KM_API VOID KeInitializeEvent(PRKEVENT Event, EVENT_TYPE Type, BOOLEAN State);
SOFTNDK_KM_API LONG KeSetEvent(PRKEVENT Event, KPRIORITY Increment, BOOLEAN Wait);
SOFTNDK_KM_API VOID KeClearEvent(PRKEVENT Event);
SOFTNDK_KM_API LONG KeResetEvent(PRKEVENT Event);
SOFTNDK_KM_API LONG KeReadStateEvent(PRKEVENT Event);
SOFTNDK_KM_API VOID KeInitializeSemaphore(PRKSEMAPHORE Semaphore, LONG Count, LONG Limit);
SOFTNDK_KM_API LONG KeReleaseSemaphore(PRKSEMAPHORE Semaphore, KPRIORITY Increment, LONG Adjustment, BOOLEAN Wait);
SOFTNDK_KM_API LONG KeReadStateSemaphore(PRKSEMAPHORE Semaphore);
/* Timeout: NULL waits forever, 0 polls, negative is relative and positive absolute, in 100 ns units.
 * A non-zero timeout at DISPATCH_LEVEL is a Verifier report (IRQL_NOT_LESS_OR_EQUAL). */
SOFTNDK_KM_API NTSTATUS KeWaitForSingleObject(PVOID Object, KWAIT_REASON WaitReason, KPROCESSOR_MODE WaitMode,
                                              BOOLEAN Alertable, PLARGE_INTEGER Timeout);
SOFTNDK_KM_API NTSTATUS KeWaitForMultipleObjects(ULONG Count, PVOID Object[], WAIT_TYPE WaitType,
                                                 KWAIT_REASON WaitReason, KPROCESSOR_MODE WaitMode, BOOLEAN Alertable,
                                                 PLARGE_INTEGER Timeout, PKWAIT_BLOCK WaitBlockArray);
SOFTNDK_KM_API NTSTATUS KeDelayExecutionThread(KPROCESSOR_MODE WaitMode, BOOLEAN Alertable, PLARGE_INTEGER Interval);
SOFTNDK_KM_API VOID KeStallExecutionProcessor(ULONG MicroSeconds);

/* ---- DPCs and timers ---- */
struct _KDPC;
typedef VOID KDEFERRED_ROUTINE(struct _KDPC* Dpc, PVOID DeferredContext, PVOID SystemArgument1, PVOID SystemArgument2);
typedef KDEFERRED_ROUTINE* PKDEFERRED_ROUTINE;
typedef struct _KDPC {
    UCHAR Type;
    UCHAR Importance;
    volatile USHORT Number;
    LIST_ENTRY DpcListEntry;
    PKDEFERRED_ROUTINE DeferredRoutine;
    PVOID DeferredContext;
    PVOID SystemArgument1;
    PVOID SystemArgument2;
    volatile PVOID DpcData; /* non-NULL while queued */
} KDPC, *PKDPC, *PRKDPC;
typedef struct _KTIMER {
    DISPATCHER_HEADER Header;
    ULARGE_INTEGER DueTime;
    LIST_ENTRY TimerListEntry;
    struct _KDPC* Dpc;
    ULONG Processor;
    LONG Period;
} KTIMER, *PKTIMER, *PRKTIMER;
SOFTNDK_KM_API VOID KeInitializeDpc(PRKDPC Dpc, PKDEFERRED_ROUTINE DeferredRoutine, PVOID DeferredContext);
SOFTNDK_KM_API BOOLEAN KeInsertQueueDpc(PRKDPC Dpc, PVOID SystemArgument1, PVOID SystemArgument2);
SOFTNDK_KM_API BOOLEAN KeRemoveQueueDpc(PRKDPC Dpc);
SOFTNDK_KM_API VOID KeFlushQueuedDpcs(void);
SOFTNDK_KM_API VOID KeInitializeTimer(PKTIMER Timer);
SOFTNDK_KM_API VOID KeInitializeTimerEx(PKTIMER Timer, TIMER_TYPE Type);
SOFTNDK_KM_API BOOLEAN KeSetTimer(PKTIMER Timer, LARGE_INTEGER DueTime, PKDPC Dpc);
SOFTNDK_KM_API BOOLEAN KeSetTimerEx(PKTIMER Timer, LARGE_INTEGER DueTime, LONG Period, PKDPC Dpc);
SOFTNDK_KM_API BOOLEAN KeCancelTimer(PKTIMER Timer);
SOFTNDK_KM_API BOOLEAN KeReadStateTimer(PKTIMER Timer);

/* ---- time and processors ---- */
SOFTNDK_KM_API LARGE_INTEGER KeQueryPerformanceCounter(PLARGE_INTEGER PerformanceFrequency);
SOFTNDK_KM_API VOID KeQuerySystemTime(PLARGE_INTEGER CurrentTime);
SOFTNDK_KM_API VOID KeQuerySystemTimePrecise(PLARGE_INTEGER CurrentTime);
SOFTNDK_KM_API ULONGLONG KeQueryInterruptTime(void);
SOFTNDK_KM_API VOID KeQueryTickCount(PLARGE_INTEGER TickCount);
SOFTNDK_KM_API ULONG KeQueryTimeIncrement(void);
typedef struct _PROCESSOR_NUMBER {
    USHORT Group;
    UCHAR Number;
    UCHAR Reserved;
} PROCESSOR_NUMBER, *PPROCESSOR_NUMBER;
SOFTNDK_KM_API ULONG KeGetCurrentProcessorNumber(void);
SOFTNDK_KM_API ULONG KeGetCurrentProcessorNumberEx(PPROCESSOR_NUMBER ProcNumber);
SOFTNDK_KM_API ULONG KeQueryActiveProcessorCount(PKAFFINITY ActiveProcessors);
SOFTNDK_KM_API ULONG KeQueryActiveProcessorCountEx(USHORT GroupNumber);
#define ALL_PROCESSOR_GROUPS 0xffff
typedef struct _KTHREAD* PKTHREAD;
typedef struct _KTHREAD* PETHREAD;
SOFTNDK_KM_API PKTHREAD KeGetCurrentThread(void);
SOFTNDK_KM_API HANDLE PsGetCurrentThreadId(void);
SOFTNDK_KM_API HANDLE PsGetCurrentProcessId(void);
#define PsGetCurrentThread() ((PETHREAD)KeGetCurrentThread())

/* ---- fast and guarded mutexes (APC_LEVEL), rundown protection ---- */
typedef struct _FAST_MUTEX {
    volatile LONG Count; /* 0 free, 1 owned */
    PVOID Owner;
    ULONG Contention;
    KEVENT Event;
    ULONG OldIrql;
} FAST_MUTEX, *PFAST_MUTEX, KGUARDED_MUTEX, *PKGUARDED_MUTEX;
SOFTNDK_KM_API VOID ExInitializeFastMutex(PFAST_MUTEX FastMutex);
SOFTNDK_KM_API VOID ExAcquireFastMutex(PFAST_MUTEX FastMutex);
SOFTNDK_KM_API VOID ExReleaseFastMutex(PFAST_MUTEX FastMutex);
SOFTNDK_KM_API BOOLEAN ExTryToAcquireFastMutex(PFAST_MUTEX FastMutex);
SOFTNDK_KM_API VOID ExAcquireFastMutexUnsafe(PFAST_MUTEX FastMutex);
SOFTNDK_KM_API VOID ExReleaseFastMutexUnsafe(PFAST_MUTEX FastMutex);
#define KeInitializeGuardedMutex ExInitializeFastMutex
#define KeAcquireGuardedMutex ExAcquireFastMutex
#define KeReleaseGuardedMutex ExReleaseFastMutex
#define KeTryToAcquireGuardedMutex ExTryToAcquireFastMutex

typedef struct _EX_RUNDOWN_REF {
    volatile ULONG_PTR Count; /* bit 0: rundown started; the rest: 2 x references */
} EX_RUNDOWN_REF, *PEX_RUNDOWN_REF;
SOFTNDK_KM_API VOID ExInitializeRundownProtection(PEX_RUNDOWN_REF RunRef);
SOFTNDK_KM_API VOID ExReInitializeRundownProtection(PEX_RUNDOWN_REF RunRef);
SOFTNDK_KM_API BOOLEAN ExAcquireRundownProtection(PEX_RUNDOWN_REF RunRef);
SOFTNDK_KM_API BOOLEAN ExAcquireRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count);
SOFTNDK_KM_API VOID ExReleaseRundownProtection(PEX_RUNDOWN_REF RunRef);
SOFTNDK_KM_API VOID ExReleaseRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count);
SOFTNDK_KM_API VOID ExWaitForRundownProtectionRelease(PEX_RUNDOWN_REF RunRef);
SOFTNDK_KM_API VOID ExRundownCompleted(PEX_RUNDOWN_REF RunRef);

/* ---- pool: tagged, NonPaged memory is locked (MmBuildMdlForNonPagedPool + NdkRegisterMr work) ---- */
typedef enum _POOL_TYPE {
    NonPagedPool = 0,
    NonPagedPoolExecute = 0,
    PagedPool = 1,
    NonPagedPoolMustSucceed = 2,
    NonPagedPoolCacheAligned = 4,
    PagedPoolCacheAligned = 5,
    NonPagedPoolNx = 512,
    NonPagedPoolNxCacheAligned = 516
} POOL_TYPE;
typedef enum _EX_POOL_PRIORITY { LowPoolPriority = 0, NormalPoolPriority = 16, HighPoolPriority = 32 } EX_POOL_PRIORITY;
#define POOL_FLAG_USE_QUOTA 0x0000000000000001ULL
#define POOL_FLAG_SESSION 0x0000000000000004ULL
#define POOL_FLAG_CACHE_ALIGNED 0x0000000000000008ULL
#define POOL_FLAG_RAISE_ON_FAILURE 0x0000000000000020ULL
#define POOL_FLAG_NON_PAGED_EXECUTE 0x0000000000000080ULL
#define POOL_FLAG_SPECIAL_POOL 0x0000000000000400ULL
SOFTNDK_KM_API PVOID SoftNdkKmAllocatePool2(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag);
SOFTNDK_KM_API VOID SoftNdkKmFreePool(PVOID P);
/* The user-mode ExAllocatePool2 / ExFreePool of softndk/wdm.h are routed through the tracking layer here. */
#define ExAllocatePool2(Flags, NumberOfBytes, Tag) SoftNdkKmAllocatePool2((Flags), (NumberOfBytes), (Tag))
#define ExFreePool(P) SoftNdkKmFreePool(P)
SOFTNDK_KM_API PVOID ExAllocatePoolWithTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
SOFTNDK_KM_API PVOID ExAllocatePoolWithTagPriority(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag,
                                                   EX_POOL_PRIORITY Priority);
SOFTNDK_KM_API PVOID ExAllocatePool(POOL_TYPE PoolType, SIZE_T NumberOfBytes);
SOFTNDK_KM_API PVOID ExAllocatePoolZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
SOFTNDK_KM_API PVOID ExAllocatePoolUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
SOFTNDK_KM_API VOID ExFreePoolWithTag(PVOID P, ULONG Tag);

/* ---- lookaside lists ---- */
typedef PVOID ALLOCATE_FUNCTION(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
typedef ALLOCATE_FUNCTION* PALLOCATE_FUNCTION;
typedef VOID FREE_FUNCTION(PVOID Buffer);
typedef FREE_FUNCTION* PFREE_FUNCTION;
struct _LOOKASIDE_LIST_EX;
typedef PVOID ALLOCATE_FUNCTION_EX(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag,
                                   struct _LOOKASIDE_LIST_EX* Lookaside);
typedef ALLOCATE_FUNCTION_EX* PALLOCATE_FUNCTION_EX;
typedef VOID FREE_FUNCTION_EX(PVOID Buffer, struct _LOOKASIDE_LIST_EX* Lookaside);
typedef FREE_FUNCTION_EX* PFREE_FUNCTION_EX;
typedef struct _SOFTNDK_LOOKASIDE {
    KSPIN_LOCK Lock;
    SINGLE_LIST_ENTRY FreeList;
    USHORT Depth;
    USHORT MaximumDepth;
    ULONG TotalAllocates;
    ULONG AllocateMisses;
    ULONG TotalFrees;
    ULONG FreeMisses;
    POOL_TYPE Type;
    ULONG Tag;
    ULONG Size;
    PVOID Allocate;   /* PALLOCATE_FUNCTION or PALLOCATE_FUNCTION_EX */
    PVOID Free;       /* PFREE_FUNCTION or PFREE_FUNCTION_EX */
    BOOLEAN Extended; /* the Ex variants pass the list to the routines */
    ULONG Magic;
} NPAGED_LOOKASIDE_LIST, *PNPAGED_LOOKASIDE_LIST, PAGED_LOOKASIDE_LIST, *PPAGED_LOOKASIDE_LIST;
typedef struct _LOOKASIDE_LIST_EX {
    NPAGED_LOOKASIDE_LIST L;
} LOOKASIDE_LIST_EX, *PLOOKASIDE_LIST_EX;
#define LOOKASIDE_MINIMUM_BLOCK_SIZE (RTL_SIZEOF_THROUGH_FIELD(SINGLE_LIST_ENTRY, Next))
#define EX_LOOKASIDE_LIST_EX_FLAGS_RAISE_ON_FAIL 0x00000001UL
#define EX_LOOKASIDE_LIST_EX_FLAGS_FAIL_NO_RAISE 0x00000002UL
SOFTNDK_KM_API VOID ExInitializeNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate,
                                                    PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size, ULONG Tag,
                                                    USHORT Depth);
SOFTNDK_KM_API VOID ExDeleteNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside);
SOFTNDK_KM_API PVOID ExAllocateFromNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside);
SOFTNDK_KM_API VOID ExFreeToNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry);
SOFTNDK_KM_API VOID ExInitializePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate,
                                                   PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size, ULONG Tag,
                                                   USHORT Depth);
SOFTNDK_KM_API VOID ExDeletePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside);
SOFTNDK_KM_API PVOID ExAllocateFromPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside);
SOFTNDK_KM_API VOID ExFreeToPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry);
SOFTNDK_KM_API NTSTATUS ExInitializeLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PALLOCATE_FUNCTION_EX Allocate,
                                                    PFREE_FUNCTION_EX Free, POOL_TYPE PoolType, ULONG Flags,
                                                    SIZE_T Size, ULONG Tag, USHORT Depth);
SOFTNDK_KM_API VOID ExDeleteLookasideListEx(PLOOKASIDE_LIST_EX Lookaside);
SOFTNDK_KM_API PVOID ExAllocateFromLookasideListEx(PLOOKASIDE_LIST_EX Lookaside);
SOFTNDK_KM_API VOID ExFreeToLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PVOID Entry);

/* ---- MDL routines: the user-mode memory manager, routed through the Verifier's MR-10 check ---- */
SOFTNDK_KM_API VOID SoftNdkKmIoFreeMdl(PMDL Mdl);
SOFTNDK_KM_API VOID SoftNdkKmMmUnlockPages(PMDL MemoryDescriptorList);
SOFTNDK_KM_API VOID SoftNdkKmMmPrepareMdlForReuse(PMDL Mdl);
SOFTNDK_KM_API VOID SoftNdkKmMmBuildMdlForNonPagedPool(PMDL MemoryDescriptorList);
#define IoFreeMdl(Mdl) SoftNdkKmIoFreeMdl(Mdl)
#define MmUnlockPages(Mdl) SoftNdkKmMmUnlockPages(Mdl)
#define MmPrepareMdlForReuse(Mdl) SoftNdkKmMmPrepareMdlForReuse(Mdl)
#define MmBuildMdlForNonPagedPool(Mdl) SoftNdkKmMmBuildMdlForNonPagedPool(Mdl)

/* ---- driver and device objects: DriverEntry / DriverUnload, work-item owners, IRP dispatch (issue 19 §1) ---- */
#define IRP_MJ_CREATE 0x00
#define IRP_MJ_CREATE_NAMED_PIPE 0x01
#define IRP_MJ_CLOSE 0x02
#define IRP_MJ_READ 0x03
#define IRP_MJ_WRITE 0x04
#define IRP_MJ_QUERY_INFORMATION 0x05
#define IRP_MJ_SET_INFORMATION 0x06
#define IRP_MJ_QUERY_EA 0x07
#define IRP_MJ_SET_EA 0x08
#define IRP_MJ_FLUSH_BUFFERS 0x09
#define IRP_MJ_QUERY_VOLUME_INFORMATION 0x0a
#define IRP_MJ_SET_VOLUME_INFORMATION 0x0b
#define IRP_MJ_DIRECTORY_CONTROL 0x0c
#define IRP_MJ_FILE_SYSTEM_CONTROL 0x0d
#define IRP_MJ_DEVICE_CONTROL 0x0e
#define IRP_MJ_INTERNAL_DEVICE_CONTROL 0x0f
#define IRP_MJ_SCSI IRP_MJ_INTERNAL_DEVICE_CONTROL
#define IRP_MJ_SHUTDOWN 0x10
#define IRP_MJ_LOCK_CONTROL 0x11
#define IRP_MJ_CLEANUP 0x12
#define IRP_MJ_CREATE_MAILSLOT 0x13
#define IRP_MJ_QUERY_SECURITY 0x14
#define IRP_MJ_SET_SECURITY 0x15
#define IRP_MJ_POWER 0x16
#define IRP_MJ_SYSTEM_CONTROL 0x17
#define IRP_MJ_DEVICE_CHANGE 0x18
#define IRP_MJ_QUERY_QUOTA 0x19
#define IRP_MJ_SET_QUOTA 0x1a
#define IRP_MJ_PNP 0x1b
#define IRP_MJ_PNP_POWER IRP_MJ_PNP
#define IRP_MJ_MAXIMUM_FUNCTION 0x1b
typedef ULONG DEVICE_TYPE;
#define CTL_CODE(DeviceType, Function, Method, Access) \
    (((DeviceType) << 16) | ((Access) << 14) | ((Function) << 2) | (Method))
#define DEVICE_TYPE_FROM_CTL_CODE(ctrlCode) (((ULONG)(ctrlCode & 0xffff0000)) >> 16)
#define METHOD_FROM_CTL_CODE(ctrlCode) ((ULONG)(ctrlCode & 3))
#define METHOD_BUFFERED 0
#define METHOD_IN_DIRECT 1
#define METHOD_OUT_DIRECT 2
#define METHOD_NEITHER 3
#define FILE_ANY_ACCESS 0
#define FILE_SPECIAL_ACCESS (FILE_ANY_ACCESS)
#define FILE_READ_ACCESS (0x0001)
#define FILE_WRITE_ACCESS (0x0002)
#define FILE_DEVICE_NETWORK 0x00000012
#define FILE_DEVICE_UNKNOWN 0x00000022
#define FILE_DEVICE_TRANSPORT 0x00000021
#define FILE_DEVICE_SECURE_OPEN 0x00000100
#define DO_BUFFERED_IO 0x00000004
#define DO_DIRECT_IO 0x00000010
#define DO_DEVICE_INITIALIZING 0x00000080
struct _DRIVER_OBJECT;
struct _DEVICE_OBJECT;
typedef NTSTATUS DRIVER_DISPATCH(struct _DEVICE_OBJECT* DeviceObject, PIRP Irp);
typedef DRIVER_DISPATCH* PDRIVER_DISPATCH;
typedef NTSTATUS DRIVER_INITIALIZE(struct _DRIVER_OBJECT* DriverObject, PUNICODE_STRING RegistryPath);
typedef DRIVER_INITIALIZE* PDRIVER_INITIALIZE;
typedef VOID DRIVER_UNLOAD(struct _DRIVER_OBJECT* DriverObject);
typedef DRIVER_UNLOAD* PDRIVER_UNLOAD;
typedef struct _DRIVER_EXTENSION {
    struct _DRIVER_OBJECT* DriverObject;
    PVOID AddDevice;
    ULONG Count;
    UNICODE_STRING ServiceKeyName;
} DRIVER_EXTENSION, *PDRIVER_EXTENSION;
typedef struct _DRIVER_OBJECT {
    CSHORT Type;
    CSHORT Size;
    struct _DEVICE_OBJECT* DeviceObject;
    ULONG Flags;
    PVOID DriverStart;
    ULONG DriverSize;
    PVOID DriverSection;
    PDRIVER_EXTENSION DriverExtension;
    UNICODE_STRING DriverName;
    PUNICODE_STRING HardwareDatabase;
    PVOID FastIoDispatch;
    PDRIVER_INITIALIZE DriverInit;
    PVOID DriverStartIo;
    PDRIVER_UNLOAD DriverUnload;
    PDRIVER_DISPATCH MajorFunction[IRP_MJ_MAXIMUM_FUNCTION + 1];
} DRIVER_OBJECT, *PDRIVER_OBJECT;
typedef struct _DEVICE_OBJECT {
    CSHORT Type;
    USHORT Size;
    LONG ReferenceCount;
    struct _DRIVER_OBJECT* DriverObject;
    struct _DEVICE_OBJECT* NextDevice;
    ULONG Flags;
    ULONG Characteristics;
    PVOID DeviceExtension;
    ULONG DeviceType;
    CCHAR StackSize;
} DEVICE_OBJECT, *PDEVICE_OBJECT;
/* ---- IRPs (issue 19 §1): the I/O status block, stack locations, dispatch and completion ----
 * The layout follows the WDK's field names (not its offsets). An IRP comes from IoAllocateIrp; IoCallDriver
 * moves to the next stack location and calls DriverObject->MajorFunction[], where an empty entry completes the
 * IRP with STATUS_INVALID_DEVICE_REQUEST as the I/O manager's default does. IoCompleteRequest runs the
 * completion routines from the current location up (STATUS_MORE_PROCESSING_REQUIRED stops it), then copies
 * IoStatus to UserIosb and sets UserEvent; the IRP stays its allocator's until IoFreeIrp. Completing an IRP
 * twice or with STATUS_PENDING is a Verifier report (bug checks 0x44 and 0xC9). */
#define POINTER_ALIGNMENT DECLSPEC_ALIGN(8)
#define IO_TYPE_IRP 6
#define STATUS_MORE_PROCESSING_REQUIRED ((NTSTATUS)0xC0000016L)
#define SL_PENDING_RETURNED 0x01
#define SL_ERROR_RETURNED 0x02
#define SL_INVOKE_ON_CANCEL 0x20
#define SL_INVOKE_ON_SUCCESS 0x40
#define SL_INVOKE_ON_ERROR 0x80
typedef struct _IO_STATUS_BLOCK {
    union {
        NTSTATUS Status;
        PVOID Pointer;
    };
    ULONG_PTR Information;
} IO_STATUS_BLOCK, *PIO_STATUS_BLOCK;
typedef NTSTATUS IO_COMPLETION_ROUTINE(PDEVICE_OBJECT DeviceObject, PIRP Irp, PVOID Context);
typedef IO_COMPLETION_ROUTINE* PIO_COMPLETION_ROUTINE;
typedef struct _IO_STACK_LOCATION {
    UCHAR MajorFunction;
    UCHAR MinorFunction;
    UCHAR Flags;
    UCHAR Control;
    union {
        struct {
            PVOID SecurityContext;
            ULONG Options;
            USHORT POINTER_ALIGNMENT FileAttributes;
            USHORT ShareAccess;
            ULONG POINTER_ALIGNMENT EaLength;
        } Create;
        struct {
            ULONG Length;
            ULONG POINTER_ALIGNMENT Key;
            LARGE_INTEGER ByteOffset;
        } Read;
        struct {
            ULONG Length;
            ULONG POINTER_ALIGNMENT Key;
            LARGE_INTEGER ByteOffset;
        } Write;
        struct {
            ULONG OutputBufferLength;
            ULONG POINTER_ALIGNMENT InputBufferLength;
            ULONG POINTER_ALIGNMENT IoControlCode;
            PVOID Type3InputBuffer;
        } DeviceIoControl;
        struct {
            PVOID Argument1;
            PVOID Argument2;
            PVOID Argument3;
            PVOID Argument4;
        } Others;
    } Parameters;
    PDEVICE_OBJECT DeviceObject;
    struct _FILE_OBJECT* FileObject;
    PIO_COMPLETION_ROUTINE CompletionRoutine;
    PVOID Context;
} IO_STACK_LOCATION, *PIO_STACK_LOCATION;
typedef VOID DRIVER_CANCEL(PDEVICE_OBJECT DeviceObject, PIRP Irp);
typedef DRIVER_CANCEL* PDRIVER_CANCEL;
struct _IRP {
    CSHORT Type;
    USHORT Size;
    PMDL MdlAddress;
    ULONG Flags;
    union {
        struct _IRP* MasterIrp;
        volatile LONG IrpCount;
        PVOID SystemBuffer;
    } AssociatedIrp;
    LIST_ENTRY ThreadListEntry;
    IO_STATUS_BLOCK IoStatus;
    KPROCESSOR_MODE RequestorMode;
    BOOLEAN PendingReturned;
    CHAR StackCount;
    CHAR CurrentLocation; /* StackCount + 1 while no driver holds the IRP */
    BOOLEAN Cancel;
    KIRQL CancelIrql;
    CCHAR ApcEnvironment;
    UCHAR AllocationFlags;
    PIO_STATUS_BLOCK UserIosb;
    PKEVENT UserEvent;
    union {
        struct {
            PVOID UserApcRoutine;
            PVOID UserApcContext;
        } AsynchronousParameters;
        LARGE_INTEGER AllocationSize;
    } Overlay;
    volatile PDRIVER_CANCEL CancelRoutine;
    PVOID UserBuffer;
    union {
        struct {
            PVOID DriverContext[4];
            PETHREAD Thread;
            PCHAR AuxiliaryBuffer;
            LIST_ENTRY ListEntry;
            struct _IO_STACK_LOCATION* CurrentStackLocation;
            struct _FILE_OBJECT* OriginalFileObject;
        } Overlay;
    } Tail;
};
typedef struct _IRP IRP;
#define IoSizeOfIrp(StackSize) ((USHORT)(sizeof(IRP) + ((StackSize) * (sizeof(IO_STACK_LOCATION)))))
FORCEINLINE PIO_STACK_LOCATION IoGetCurrentIrpStackLocation(PIRP Irp) {
    return Irp->Tail.Overlay.CurrentStackLocation;
}
FORCEINLINE PIO_STACK_LOCATION IoGetNextIrpStackLocation(PIRP Irp) {
    return Irp->Tail.Overlay.CurrentStackLocation - 1;
}
FORCEINLINE VOID IoSetNextIrpStackLocation(PIRP Irp) {
    Irp->CurrentLocation--;
    Irp->Tail.Overlay.CurrentStackLocation--;
}
FORCEINLINE VOID IoSkipCurrentIrpStackLocation(PIRP Irp) {
    Irp->CurrentLocation++;
    Irp->Tail.Overlay.CurrentStackLocation++;
}
FORCEINLINE VOID IoCopyCurrentIrpStackLocationToNext(PIRP Irp) {
    PIO_STACK_LOCATION current = IoGetCurrentIrpStackLocation(Irp), next = IoGetNextIrpStackLocation(Irp);
    memcpy(next, current, offsetof(IO_STACK_LOCATION, CompletionRoutine));
    next->Control = 0;
}
FORCEINLINE VOID IoMarkIrpPending(PIRP Irp) {
    IoGetCurrentIrpStackLocation(Irp)->Control |= SL_PENDING_RETURNED;
}
FORCEINLINE VOID IoSetCompletionRoutine(PIRP Irp, PIO_COMPLETION_ROUTINE CompletionRoutine, PVOID Context,
                                        BOOLEAN InvokeOnSuccess, BOOLEAN InvokeOnError, BOOLEAN InvokeOnCancel) {
    PIO_STACK_LOCATION next = IoGetNextIrpStackLocation(Irp);
    next->CompletionRoutine = CompletionRoutine;
    next->Context = Context;
    next->Control = 0;
    if (InvokeOnSuccess) next->Control = SL_INVOKE_ON_SUCCESS;
    if (InvokeOnError) next->Control |= SL_INVOKE_ON_ERROR;
    if (InvokeOnCancel) next->Control |= SL_INVOKE_ON_CANCEL;
}
/* StackSize 1 … 32; NULL when out of range or out of pool. ChargeQuota is ignored. */
SOFTNDK_KM_API PIRP IoAllocateIrp(CCHAR StackSize, BOOLEAN ChargeQuota);
SOFTNDK_KM_API VOID IoFreeIrp(PIRP Irp);
SOFTNDK_KM_API VOID IoReuseIrp(PIRP Irp, NTSTATUS Iostatus);
SOFTNDK_KM_API NTSTATUS IofCallDriver(PDEVICE_OBJECT DeviceObject, PIRP Irp);
SOFTNDK_KM_API VOID IofCompleteRequest(PIRP Irp, CCHAR PriorityBoost);
#define IoCallDriver(DeviceObject, Irp) IofCallDriver((DeviceObject), (Irp))
#define IoCompleteRequest(Irp, PriorityBoost) IofCompleteRequest((Irp), (PriorityBoost))

SOFTNDK_KM_API NTSTATUS IoCreateDevice(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize,
                                       PUNICODE_STRING DeviceName, ULONG DeviceType, ULONG DeviceCharacteristics,
                                       BOOLEAN Exclusive, PDEVICE_OBJECT* DeviceObject);
SOFTNDK_KM_API VOID IoDeleteDevice(PDEVICE_OBJECT DeviceObject);
/* A name table (issue 19 §1): STATUS_OBJECT_NAME_COLLISION for a link that exists, STATUS_OBJECT_NAME_NOT_FOUND
 * for deleting one that does not, STATUS_INVALID_PARAMETER for an empty name. Names compare case-insensitively;
 * nothing opens them (there is no user mode). A link not deleted is a leak. */
SOFTNDK_KM_API NTSTATUS IoCreateSymbolicLink(PUNICODE_STRING SymbolicLinkName, PUNICODE_STRING DeviceName);
SOFTNDK_KM_API NTSTATUS IoDeleteSymbolicLink(PUNICODE_STRING SymbolicLinkName);

/* ---- work items on a real worker pool (PASSIVE_LEVEL) ---- */
typedef enum _WORK_QUEUE_TYPE {
    CriticalWorkQueue = 0,
    DelayedWorkQueue = 1,
    HyperCriticalWorkQueue = 2,
    NormalWorkQueue = 3,
    BackgroundWorkQueue = 4,
    RealTimeWorkQueue = 5,
    SuperCriticalWorkQueue = 6,
    MaximumWorkQueue = 7
} WORK_QUEUE_TYPE;
typedef struct _IO_WORKITEM IO_WORKITEM, *PIO_WORKITEM;
typedef VOID IO_WORKITEM_ROUTINE(PDEVICE_OBJECT DeviceObject, PVOID Context);
typedef IO_WORKITEM_ROUTINE* PIO_WORKITEM_ROUTINE;
typedef VOID IO_WORKITEM_ROUTINE_EX(PVOID IoObject, PVOID Context, PIO_WORKITEM IoWorkItem);
typedef IO_WORKITEM_ROUTINE_EX* PIO_WORKITEM_ROUTINE_EX;
SOFTNDK_KM_API PIO_WORKITEM IoAllocateWorkItem(PDEVICE_OBJECT DeviceObject);
SOFTNDK_KM_API VOID IoFreeWorkItem(PIO_WORKITEM IoWorkItem);
SOFTNDK_KM_API ULONG IoSizeofWorkItem(void);
SOFTNDK_KM_API VOID IoInitializeWorkItem(PVOID IoObject, PIO_WORKITEM IoWorkItem);
SOFTNDK_KM_API VOID IoUninitializeWorkItem(PIO_WORKITEM IoWorkItem);
SOFTNDK_KM_API VOID IoQueueWorkItem(PIO_WORKITEM IoWorkItem, PIO_WORKITEM_ROUTINE WorkerRoutine,
                                    WORK_QUEUE_TYPE QueueType, PVOID Context);
SOFTNDK_KM_API VOID IoQueueWorkItemEx(PIO_WORKITEM IoWorkItem, PIO_WORKITEM_ROUTINE_EX WorkerRoutine,
                                      WORK_QUEUE_TYPE QueueType, PVOID Context);
typedef VOID WORKER_THREAD_ROUTINE(PVOID Parameter);
typedef WORKER_THREAD_ROUTINE* PWORKER_THREAD_ROUTINE;
typedef struct _WORK_QUEUE_ITEM {
    LIST_ENTRY List;
    PWORKER_THREAD_ROUTINE WorkerRoutine;
    volatile PVOID Parameter;
} WORK_QUEUE_ITEM, *PWORK_QUEUE_ITEM;
#define ExInitializeWorkItem(Item, Routine, Context) \
    do {                                             \
        (Item)->WorkerRoutine = (Routine);           \
        (Item)->Parameter = (Context);               \
        (Item)->List.Flink = NULL;                   \
    } while (0)
SOFTNDK_KM_API VOID ExQueueWorkItem(PWORK_QUEUE_ITEM WorkItem, WORK_QUEUE_TYPE QueueType);

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_WDM_H */
