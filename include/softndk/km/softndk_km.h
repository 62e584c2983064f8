/* softndk kernel layer — host and test control (not a WDK header). Drivers never need it; softndk-kmhost and
 * tests use it to register NDK interfaces, choose how the Verifier reacts, and read leak statistics. */
#ifndef SOFTNDK_KM_SOFTNDK_KM_H
#define SOFTNDK_KM_SOFTNDK_KM_H

#include <softndk/km/netioapi.h>
#include <softndk/softndk.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- NDK interfaces: IfIndex -> adapter configuration (WskOpenNdkAdapter, GetUnicastIpAddressTable) ---- */
/* Registers (or replaces) an interface. Config NULL = SoftNdkInitAdapterConfig defaults. */
SOFTNDK_KM_API NTSTATUS SoftNdkKmRegisterInterface(NET_IFINDEX IfIndex, const SOFTNDK_ADAPTER_CONFIG* Config);
SOFTNDK_KM_API NTSTATUS SoftNdkKmUnregisterInterface(NET_IFINDEX IfIndex);
/* Registers interface 1 from the environment unless one is registered already:
 *   SOFTNDK_COMPLETION=inline|pend|random   SOFTNDK_SEED=N
 *   SOFTNDK_FAULTS="Function[:nth=N|:p=F][:async][:status=0xC000009A][:seed=N];..."
 * Returns STATUS_INVALID_PARAMETER (with SoftNdkGetLastErrorText) for a malformed value. */
SOFTNDK_KM_API NTSTATUS SoftNdkKmConfigureFromEnvironment(void);
/* Parses one SOFTNDK_FAULTS value into Config (appending rules). */
SOFTNDK_KM_API NTSTATUS SoftNdkKmParseFaults(const char* Text, SOFTNDK_ADAPTER_CONFIG* Config);

/* ---- the registry drivers read (ZwOpenKey, ZwQueryValueKey): a key store the host fills ---- */
/* Sets ValueName under KeyPath (e.g. L"\\Registry\\Machine\\System\\CurrentControlSet\\Services\\x\\Parameters")
 * to Type (REG_DWORD, REG_SZ with its terminating NUL in DataLength, …). Keys are made as needed. */
SOFTNDK_KM_API NTSTATUS SoftNdkKmSetRegistryValue(PCWSTR KeyPath, PCWSTR ValueName, ULONG Type, const VOID* Data,
                                                  ULONG DataLength);

/* ---- Verifier ---- */
typedef enum _SOFTNDK_VERIFIER_MODE {
    SOFTNDK_VERIFIER_OFF = 0,  /* no checks, no hooks in the provider */
    SOFTNDK_VERIFIER_LOG = 1,  /* report (stderr + callback), refuse the offending NDK call, carry on */
    SOFTNDK_VERIFIER_ABORT = 2 /* report, then abort() like a bug check (default; SOFTNDK_VERIFIER=log|off|abort) */
} SOFTNDK_VERIFIER_MODE;
typedef struct _SOFTNDK_VERIFIER_REPORT {
    const char* Rule;      /* e.g. "IRQL_NOT_LESS_OR_EQUAL", "NDK_QP_05_CONCURRENT_POST" */
    ULONG BugCheckCode;    /* the Windows bug check it stands for (0xC4 Driver Verifier, 0xA IRQL, …) */
    const char* Call;      /* the routine that was called */
    KIRQL Irql;            /* the caller's IRQL */
    const char* Detail;    /* what was wrong */
    const char* Backtrace; /* symbolised frames, one a line */
    /* BugCheckCode 0: a warning about a consumer rule that hardware tolerates (e.g. CM-12), the call went on */
} SOFTNDK_VERIFIER_REPORT;
typedef VOID (*SOFTNDK_VERIFIER_CALLBACK)(PVOID Context, const SOFTNDK_VERIFIER_REPORT* Report);
SOFTNDK_KM_API VOID SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_MODE Mode);
SOFTNDK_KM_API SOFTNDK_VERIFIER_MODE SoftNdkKmGetVerifierMode(void);
SOFTNDK_KM_API VOID SoftNdkKmSetVerifierCallback(SOFTNDK_VERIFIER_CALLBACK Callback, PVOID Context);
SOFTNDK_KM_API ULONG SoftNdkKmVerifierViolationCount(void);

/* ---- leaks and idleness ---- */
typedef struct _SOFTNDK_KM_STATISTICS {
    ULONG PoolAllocations; /* outstanding */
    ULONG64 PoolBytes;
    ULONG NdkObjects;  /* NDK objects created through the provider and not yet destroyed */
    ULONG NdkAdapters; /* WskOpenNdkAdapter opens not closed (opens of one interface share a device) */
    ULONG WskRegistrations;
    ULONG WorkItemsQueued; /* queued or running */
    ULONG TimersArmed;
    ULONG DpcsQueued;
    ULONG DeviceObjects;
    ULONG RegistryKeysOpen; /* ZwOpenKey handles not closed */
    ULONG SymbolicLinks;    /* IoCreateSymbolicLink names not deleted (issue 19 §1) */
} SOFTNDK_KM_STATISTICS;
SOFTNDK_KM_API VOID SoftNdkKmGetStatistics(SOFTNDK_KM_STATISTICS* Statistics);
/* Prints outstanding pool by tag and every other leak to stderr; returns the number of leaked things. */
SOFTNDK_KM_API ULONG SoftNdkKmReportLeaks(void);
/* No work item queued or running, no timer armed, no DPC queued. */
SOFTNDK_KM_API BOOLEAN SoftNdkKmIsIdle(void);
/* Waits for the worker pool, timer and DPC threads to finish what is queued, then stops them. */
SOFTNDK_KM_API VOID SoftNdkKmShutdown(void);

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_SOFTNDK_KM_H */
