// Internals shared by the kernel layer's translation units (issue 9 §2/§3).
#pragma once

#include <condition_variable>
#include <cstdarg>
#include <mutex>

#include <softndk/km/ip2string.h>
#include <softndk/km/softndk_km.h>
#include <softndk/km/wdm.h>
#include <softndk/km/wsk.h>

namespace softndk::km {

// ---- IRQL model: one level per thread, PASSIVE_LEVEL at thread start ----
KIRQL CurrentIrql();
void SetIrql(KIRQL irql);
const char* IrqlName(KIRQL irql);

// ---- Verifier reports ----
// Bug check codes the rules stand for.
constexpr ULONG kIrqlNotLessOrEqual = 0x0A;
constexpr ULONG kIrqlNotGreaterOrEqual = 0x09;
constexpr ULONG kSpinLockAlreadyOwned = 0x0F;
constexpr ULONG kSpinLockNotOwned = 0x10;
constexpr ULONG kBadPoolCaller = 0xC2;
constexpr ULONG kDriverVerifierDetectedViolation = 0xC4;
constexpr ULONG kDriverVerifierIoManagerViolation = 0xC9;
constexpr ULONG kKernelSecurityCheckFailure = 0x139;
constexpr ULONG kKmodeExceptionNotHandled = 0x1E;

// Reports a violation: stderr (rule, call, IRQL, detail, backtrace) and the callback; aborts in abort mode.
// Returns normally only in log mode. Off mode: nothing happens.
void Report(const char* rule, ULONG bug_check, const char* call, const char* format, ...)
    __attribute__((format(printf, 4, 5)));
SOFTNDK_VERIFIER_MODE Mode();
// IRQL rule of `call`: true when the caller's IRQL is at most `max`; otherwise a report.
bool RequireIrqlAtMost(KIRQL max, const char* call);

// ---- the Verifier's view of provider objects and MDLs (verifier.cpp) ----
// Issue 19 §3: the object's calls print their refusals (src/km/refusals.cpp).
bool RefusalReportsEnabled();
void ReportRefusalsOf(void* handle, NDK_OBJECT_TYPE type);
void ReportFailedCompletion(const char* function, NTSTATUS status);
// Issue 19 §3: a consumer rule that hardware tolerates (CM-12): a warning by rule id, or a stop if so configured.
void ReportTolerated(const char* rule, const char* call, const char* detail);
void ForgetObject(const void* handle);  // an adapter closed through WSK
bool MdlBusy(const void* mdl);          // MR-10: part of a pending registration
ULONG LiveNdkObjects();
void ReleaseQuarantine();

// ---- one lock and condition for every dispatcher object (events, semaphores, timers, mutexes, rundown) ----
std::mutex& DispatcherMutex();
std::condition_variable& DispatcherCondition();

// ---- counters for leaks and idleness ----
ULONG WorkItemsOutstanding();
ULONG TimersArmed();
ULONG DpcsOutstanding();
ULONG DeviceObjects();
ULONG WskRegistrations();
ULONG OpenAdapters();
ULONG OpenRegistryKeys();  // ZwOpenKey handles not closed
ULONG SymbolicLinks();     // IoCreateSymbolicLink names not deleted (io.cpp)
void PoolStatistics(ULONG* allocations, ULONG64* bytes);
ULONG ReportPoolLeaks();  // prints by tag, returns allocation count
void ShutdownWorkers();
void ShutdownTimersAndDpcs();

// Formats a pool tag the way poolmon shows it (bytes in memory order).
void FormatTag(ULONG tag, char out[5]);

}  // namespace softndk::km
