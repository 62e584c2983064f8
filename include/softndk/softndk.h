/* softndk — adapter open/close and configuration: the user-mode stand-in for the NDIS open/close handlers
 * (AMB-12). Includes the NDKPI and the wdm.h memory manager. */
#ifndef SOFTNDK_SOFTNDK_H
#define SOFTNDK_SOFTNDK_H

#include <softndk/ndkpi.h>
#include <softndk/wdm.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SOFTNDK_ADAPTER_CONFIG_VERSION 11

typedef enum _SOFTNDK_COMPLETION_MODE {
    SOFTNDK_COMPLETION_INLINE = 0, /* complete in the call, return STATUS_SUCCESS (default) */
    SOFTNDK_COMPLETION_PEND = 1,   /* return STATUS_PENDING, complete from a provider thread */
    SOFTNDK_COMPLETION_RANDOM = 2  /* a seeded mix of the two */
} SOFTNDK_COMPLETION_MODE;

/* How two adapters' QPs reach each other (issue 7). The environment variable SOFTNDK_TRANSPORT (auto, inproc,
 * deferred, tcp) sets it in SoftNdkInitAdapterConfig. */
/* The ready-to-receive frame an initiator's MPA v2 Request offers (RFC 6581 §6, P2P); the environment variable
 * SOFTNDK_MPA_RTR (write, read) sets it in SoftNdkInitAdapterConfig. */
typedef enum _SOFTNDK_MPA_RTR {
    SOFTNDK_MPA_RTR_WRITE = 0, /* a zero-length RDMA Write (the default; siw answers with it when offered) */
    SOFTNDK_MPA_RTR_READ = 1   /* a zero-length RDMA Read Request, answered by a zero-length Read Response */
} SOFTNDK_MPA_RTR;

typedef enum _SOFTNDK_TRANSPORT {
    SOFTNDK_TRANSPORT_AUTO = 0,                /* in-process link to a listener of this process, else iWARP/TCP;
                                                  listeners also take TCP connections (default) */
    SOFTNDK_TRANSPORT_IN_PROCESS = 1,          /* in-process only: requests finish inside the post */
    SOFTNDK_TRANSPORT_IN_PROCESS_DEFERRED = 2, /* in-process only: requests finish later, as on a wire */
    SOFTNDK_TRANSPORT_TCP = 3                  /* iWARP over TCP always, even to a listener of this process */
} SOFTNDK_TRANSPORT;

/* Wire fault injection (issue 7): what the network does to each connection's outbound stream. 0 = off. */
typedef struct _SOFTNDK_WIRE_FAULTS {
    ULONG64 DropAfterBytes;  /* reset the connection once this many bytes are out */
    ULONG64 DropAfterFpdus;  /* reset it once this many FPDUs are out */
    ULONG64 CorruptByte;     /* flip outbound stream byte N (from 1) */
    ULONG64 StallAfterBytes; /* send nothing more after this many bytes */
    ULONG DelayMicroseconds; /* wait before each send */
} SOFTNDK_WIRE_FAULTS;

/* Make calls of one named provider function fail (e.g. FunctionName = "NdkRegisterMr").
 * NthCall > 0: only the Nth call (1-based) fails; NthCall = 0: each call fails with Probability (seeded). */
typedef struct _SOFTNDK_FAULT_RULE {
    const char* FunctionName;
    ULONG NthCall;
    double Probability;
    ULONG Seed;
    BOOLEAN Asynchronous; /* TRUE: return STATUS_PENDING, then complete with Status */
    NTSTATUS Status;
} SOFTNDK_FAULT_RULE;

#define SOFTNDK_MAX_FAULT_RULES 8
#define SOFTNDK_MAX_LOCAL_ADDRESSES 8

typedef struct _SOFTNDK_ADAPTER_CONFIG {
    ULONG Size;                   /* sizeof(SOFTNDK_ADAPTER_CONFIG) */
    ULONG Version;                /* SOFTNDK_ADAPTER_CONFIG_VERSION */
    NDK_VERSION RequestedVersion; /* AI-08 negotiation (1.0 … 1.2 or 2.0 … 2.1); default 1.2 */
    ULONG CompletionMode;         /* a SOFTNDK_COMPLETION_MODE */
    ULONG RandomSeed;             /* SOFTNDK_COMPLETION_RANDOM; also seeds token randomisation when non-zero */
    ULONG FaultRuleCount;
    SOFTNDK_FAULT_RULE FaultRules[SOFTNDK_MAX_FAULT_RULES];
    NDK_ADAPTER_INFO Limits; /* what NdkQueryAdapterInfo advertises and the adapter enforces */
    ULONG LocalAddressCount;
    SOCKADDR_INET LocalAddresses[SOFTNDK_MAX_LOCAL_ADDRESSES];
    /* Version 2. NdkConnect waits this long for the peer's answer and NdkAccept(Ex) for the peer's
     * NdkCompleteConnect(Ex), then each completes with STATUS_IO_TIMEOUT (CM-04, CM-08); 0 = wait for ever.
     * Default 30000, at most 3600000 (env SOFTNDK_ACCEPT_TIMEOUT_MS). */
    ULONG AcceptTimeoutMs;
    ULONG Transport;            /* a SOFTNDK_TRANSPORT */
    ULONG ProgressThreads;      /* progress threads of the adapter (1 … 16, default 1) */
    ULONG BusyPollMicroseconds; /* how long a progress thread spins before it blocks (default 50) */
    /* Version 3 (iWARP over TCP). */
    ULONG MpaCrc; /* 1: ask for CRC32c in MPA (env SOFTNDK_MPA_CRC=1); a peer may ask too */
    SOFTNDK_WIRE_FAULTS WireFaults;
    CHAR InterfaceName[16]; /* bind the adapter to one interface (env SOFTNDK_INTERFACE): its addresses
                               replace LocalAddresses */
    ULONG InterfaceIndex;   /* the same by index; 0 = none */
    /* Version 4. Write the adapter's iWARP/TCP traffic to this pcap file (env SOFTNDK_TRACE); "" = off.
     * Adapters of one process naming the same file share it. */
    CHAR TracePath[256];
    /* Version 5. A SOFTNDK_MPA_RTR: the RTR the adapter's connects offer. */
    ULONG MpaRtr;
    /* Version 6. 1 (default): while a responder stays silent after our RTR, zero-length Writes from 10 ms to
     * 10.24 s wake it (siw-on-the-wire §3.4); 0: none, so the outbound stream holds only what the consumer posted
     * (env SOFTNDK_RTR_KICKS=0). */
    ULONG RtrKicks;
    /* Version 7 (issue 18 §2): what a peer may hold of a listener before it is an RDMA peer.
     * MpaRequestTimeoutMs: an accepted socket whose MPA Request is not complete this long after the accept is
     *   reset (env SOFTNDK_MPA_REQUEST_TIMEOUT_MS; default 5000, as Linux siw's responder; 0 = no limit).
     * MaxHalfOpen: sockets of one listener waiting for their Request; one more resets the oldest
     *   (env SOFTNDK_MAX_HALF_OPEN; default 256; 0 = no cap).
     * AcceptRetryMs: an accept that fails for want of descriptors or memory (EMFILE, ENFILE, ENOMEM, ENOBUFS)
     *   pauses the listener this long (env SOFTNDK_ACCEPT_RETRY_MS; default 100; 1 … 60000). */
    ULONG MpaRequestTimeoutMs;
    ULONG MaxHalfOpen;
    ULONG AcceptRetryMs;
    /* Version 8 (issue 18 §2, CM-25): NdkDisconnect waits this long for the peer's FIN (and for the data queued
     * before ours to go out); then the connection is reset, the QP flushed, and the request completes with
     * STATUS_IO_TIMEOUT (env SOFTNDK_DISCONNECT_TIMEOUT_MS; default 60000, as Chelsio's iWARP driver's endpoint
     * timer and Linux's tcp_fin_timeout; 1 … 3600000). */
    ULONG DisconnectTimeoutMs;
    /* Version 8 (issue 18 §2): a peer that stops inside an FPDU or a message, or stops reading what we send, with
     * no byte either way for this long while such work is open, has its connection reset, so that it cannot pin
     * registered memory (env SOFTNDK_PEER_STALL_TIMEOUT_MS; default 60000, as DisconnectTimeoutMs; 1 … 3600000). */
    ULONG PeerStallTimeoutMs;
    /* Version 9 (issue 19 §2, AMB-39): 0 (default): a fast-register MR keeps the tokens read after
     * NdkInitializeFastRegisterMr across NdkFastRegister / NdkInvalidate cycles, as hardware keeps an MR's key
     * until the consumer changes it (an invalidated MR still refuses every access until registered again).
     * 1: the keys change on every NdkFastRegister, so a consumer that reuses an old token fails, and the stale
     * token is reported with its MR and cycle (env SOFTNDK_ROTATE_FR_KEYS=1). */
    ULONG RotateFastRegisterKeys;
    /* Version 10 (issue 20 §1): 1 (default): an adapter not bound to an interface also owns every address this
     * host has when the call is made, so a consumer connects from the address the route to its peer picks, and
     * listens on any of them, with no SOFTNDK_INTERFACE. 0: it owns only LocalAddresses. Binding to an interface
     * (InterfaceName / InterfaceIndex, SOFTNDK_INTERFACE) restricts it to that interface's addresses either way
     * (env SOFTNDK_HOST_ADDRESSES=0|1). */
    ULONG HostAddresses;
    /* Version 11 (issue 21, CB-19): requests posted with NDK_OP_FLAG_DEFER go with the next post without the flag
     * or when a post fails inline (CB-18). A chain the consumer leaves deferred is sent this long after its first
     * request anyway (env SOFTNDK_DEFER_BACKSTOP_MS; default 10; 0 = never, as a hardware doorbell; ≤ 60000). */
    ULONG DeferBackstopMs;
} SOFTNDK_ADAPTER_CONFIG;

/* Fills defaults: inline completions, no faults, honest limits, 127.0.0.1 and ::1, a 30 s accept timeout. */
SOFTNDK_API VOID SoftNdkInitAdapterConfig(SOFTNDK_ADAPTER_CONFIG* Config);
/* Config NULL = defaults. Fails with NDIS_STATUS_BAD_VERSION (AI-08), STATUS_INVALID_PARAMETER for a bad
 * config, STATUS_NOT_SUPPORTED for an adapter flag the provider cannot honour. */
SOFTNDK_API NTSTATUS SoftNdkOpenAdapter(const SOFTNDK_ADAPTER_CONFIG* Config, NDK_ADAPTER** ppNdkAdapter);
/* Blocking (LIFE-15): returns once every object of the adapter is closed and every callback has returned. */
SOFTNDK_API NTSTATUS SoftNdkCloseAdapter(NDK_ADAPTER* pNdkAdapter);

/* What an open adapter is bound to and how it reaches peers (issue 7 §7, for ndkinfo): the addresses it owns
 * (an interface's when bound to one), its transport and wire options. */
typedef struct _SOFTNDK_ADAPTER_DETAILS {
    ULONG Size;             /* sizeof(SOFTNDK_ADAPTER_DETAILS) */
    CHAR InterfaceName[16]; /* "" unless bound to an interface */
    ULONG InterfaceIndex;   /* 0 unless bound */
    ULONG Transport;        /* a SOFTNDK_TRANSPORT */
    ULONG MpaCrc;
    ULONG MpaRtr; /* a SOFTNDK_MPA_RTR */
    ULONG ProgressThreads;
    ULONG BusyPollMicroseconds;
    /* What the adapter serves: its configured addresses and, with HostAddresses (the default when no interface is
     * bound), every address of this host now; the first SOFTNDK_MAX_LOCAL_ADDRESSES of them. */
    ULONG LocalAddressCount;
    SOCKADDR_INET LocalAddresses[SOFTNDK_MAX_LOCAL_ADDRESSES];
} SOFTNDK_ADAPTER_DETAILS;
/* STATUS_INVALID_PARAMETER for an adapter that is not open, a NULL Details or a wrong Details->Size. */
SOFTNDK_API NTSTATUS SoftNdkQueryAdapterDetails(NDK_ADAPTER* pNdkAdapter, SOFTNDK_ADAPTER_DETAILS* Details);

/* What an NDK_RESULT_EX.ProviderErrorCode means (CQ-14), as text for a log: a cause from an iWARP Terminate, sent
 * or received, is its RFC 5040 layer/type/code and name, e.g. "DDP/0x1/0x00 (DDP tagged buffer: invalid STag)";
 * 0 is "none". Writes a NUL-terminated text of at most Length bytes. STATUS_INVALID_PARAMETER for a NULL Buffer
 * or a Length of 0; STATUS_BUFFER_OVERFLOW when the text was cut to fit. */
SOFTNDK_API NTSTATUS SoftNdkFormatProviderError(ULONG ProviderErrorCode, CHAR* Buffer, ULONG Length);

/* The name of an NTSTATUS, e.g. "STATUS_CONNECTION_REFUSED" for 0xC0000236: every status that softndk's headers
 * define (ndkpi.h and the km layer). NULL for a value it does not name; the text is static, never freed. Print
 * it with the number, as the tools do: "STATUS_CONNECTION_REFUSED (0xC0000236)". */
SOFTNDK_API const char* SoftNdkStatusName(NTSTATUS Status);

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_SOFTNDK_H */
