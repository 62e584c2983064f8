/* ndkping --rping: rping's own application protocol (rdma-core librdmacm/examples/rping.c; siw-on-the-wire §1) over
 * softndk, so that softndk talks to rping on Linux soft-iWARP or an iWARP NIC, either side. rping's flags:
 *   ndkping --rping -s [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V] [-d]      server
 *   ndkping --rping -c  -a ADDR  [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V] [-d]      client
 * Per iteration (§1.3): the client Sends {start_buf VA, STag, size} (16 bytes, big-endian); the server Reads
 * that many bytes into its rdma_buf and answers with a 16-byte go-ahead Send; the client Sends {rdma_buf VA,
 * STag, size}; the server Writes its buffer there and answers with a second go-ahead; -V compares the buffers.
 * The connection asks for IRD 1 and ORD 1 with no private data, as rping does (softndk's --limits N asks for N,
 * issue 8 §3); the server accepts with the limits the client asked for, mirrored (librdmacm's rdma_accept(…,
 * NULL) does the same). With -V the server also checks that what it Read is rping's pattern for that iteration.
 * Exit status 0 when every iteration passed (and, for a server with -C, when all of them came). */
#include <arpa/inet.h>
#include <endian.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ndk_route.h"
#include "ndk_wait.h"
#include "ndkping_rping.h"

#define RPING_PORT 7174
#define RPING_MIN_SIZE 26 /* rping's RPING_MIN_BUFSIZE: "rdma-ping-%d: " with the largest int */
#define RPING_MAX_SIZE 65535
#define RPING_INFO 16 /* sizeof(struct rping_rdma_info) */
#define RPING_STASH 4

typedef struct {
    NDK_ADAPTER* adapter;
    NDK_PD* pd;
    NDK_CQ* cq;
    NDK_QP* qp;
    NDK_LISTENER* listener;
    NDK_CONNECTOR* connector;
    unsigned char* memory; /* [0, 2 pages): receive and send slots; then start_buf, then rdma_buf */
    size_t bytes;
    PMDL mdl;
    NDK_MR* mr;
    unsigned char* receive;
    unsigned char* send;
    unsigned char* start_buf;
    unsigned char* rdma_buf;
    int debug;
    ULONG limits;                     /* the client's IRD and ORD (rping: 1) */
    NDK_RESULT_EX stash[RPING_STASH]; /* completions that came before the one waited for (rping_expect) */
    int stashed;
} rping_t;

static _Atomic(NDK_CONNECTOR*) g_rping_incoming;
static atomic_int g_rping_disconnected;

static void rping_on_connect(PVOID context, NDK_CONNECTOR* connector) {
    (void)context;
    atomic_store(&g_rping_incoming, connector);
}
static void rping_on_disconnect(PVOID context) {
    (void)context;
    atomic_store(&g_rping_disconnected, 1);
}
static void rping_on_cq(PVOID context, NTSTATUS status) {
    (void)context;
    (void)status;
}

static void rping_open(rping_t* r, ULONG size) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    ndk_check(SoftNdkOpenAdapter(&config, &r->adapter), "SoftNdkOpenAdapter");
    ndk_wait_t wait = {0};
    r->pd = ndk_created(&wait, r->adapter->Dispatch->NdkCreatePd(r->adapter, ndk_wait_on_create, &wait, &r->pd), &r->pd,
                        "NdkCreatePd");
    memset(&wait, 0, sizeof(wait));
    r->cq = ndk_created(
        &wait,
        r->adapter->Dispatch->NdkCreateCq(r->adapter, 16, rping_on_cq, NULL, NULL, ndk_wait_on_create, &wait, &r->cq),
        &r->cq, "NdkCreateCq");
    memset(&wait, 0, sizeof(wait));
    r->qp = ndk_created(
        &wait, r->pd->Dispatch->NdkCreateQp(r->pd, r->cq, r->cq, r, 2, 4, 1, 1, 0, ndk_wait_on_create, &wait, &r->qp),
        &r->qp, "NdkCreateQp");
    const size_t buffer = (size + PAGE_SIZE - 1) / PAGE_SIZE * PAGE_SIZE;
    r->bytes = 2 * PAGE_SIZE + 2 * buffer;
    r->memory = ExAllocatePool2(POOL_FLAG_NON_PAGED, r->bytes, 0);
    if (r->memory == NULL) ndk_check(STATUS_INSUFFICIENT_RESOURCES, "ExAllocatePool2");
    r->receive = r->memory;
    r->send = r->memory + PAGE_SIZE;
    r->start_buf = r->memory + 2 * PAGE_SIZE;
    r->rdma_buf = r->start_buf + buffer;
    memset(&wait, 0, sizeof(wait));
    r->mr = ndk_created(&wait, r->pd->Dispatch->NdkCreateMr(r->pd, FALSE, ndk_wait_on_create, &wait, &r->mr), &r->mr,
                        "NdkCreateMr");
    r->mdl = IoAllocateMdl(r->memory, (ULONG)r->bytes, FALSE, FALSE, NULL);
    MmBuildMdlForNonPagedPool(r->mdl);
    memset(&wait, 0, sizeof(wait));
    /* rping registers its buffers LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE (§1.1) */
    ndk_check(
        ndk_wait(&wait, r->mr->Dispatch->NdkRegisterMr(r->mr, r->mdl, r->bytes,
                                                       NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                                           NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                                                       ndk_wait_on_request, &wait)),
        "NdkRegisterMr");
}

/* NdkClose<Object>, waited for. */
#define RPING_CLOSE(object, close)                                                                       \
    do {                                                                                                 \
        if ((object) != NULL) {                                                                          \
            ndk_wait_t closed = {0};                                                                     \
            ndk_wait(&closed, (object)->Dispatch->close(&(object)->Header, ndk_wait_on_close, &closed)); \
        }                                                                                                \
    } while (0)

static void rping_close(rping_t* r) {
    RPING_CLOSE(r->connector, NdkCloseConnector);
    RPING_CLOSE(r->listener, NdkCloseListener);
    RPING_CLOSE(r->qp, NdkCloseQp);
    RPING_CLOSE(r->mr, NdkCloseMr);
    IoFreeMdl(r->mdl);
    ExFreePool(r->memory);
    RPING_CLOSE(r->cq, NdkCloseCq);
    RPING_CLOSE(r->pd, NdkClosePd);
    SoftNdkCloseAdapter(r->adapter);
}

static NDK_SGE rping_sge(rping_t* r, void* address, ULONG length) {
    NDK_SGE s;
    s.VirtualAddress = address;
    s.Length = length;
    s.MemoryRegionToken = r->mr->Dispatch->NdkGetLocalTokenFromMr(r->mr);
    return s;
}

static void rping_post_receive(rping_t* r) {
    NDK_SGE s = rping_sge(r, r->receive, RPING_INFO);
    ndk_check(r->qp->Dispatch->NdkReceive(r->qp, NULL, &s, 1), "NdkReceive");
}

/* The next completion; 0 when the peer disconnected first (the server's normal end). */
static int rping_poll(rping_t* r, NDK_RESULT_EX* result) {
    for (;;) {
        const int disconnected = atomic_load(&g_rping_disconnected);
        if (r->cq->Dispatch->NdkGetCqResultsEx(r->cq, result, 1) == 1) return 1;
        if (disconnected) return 0;
    }
}

/* A completion of `type` that succeeded; anything else ends the run (rping: "cq completion failed"). The
 * receive and initiator queues share the CQ and need not complete in posting order across them (a peer's next
 * message may arrive before our Send's completion is polled), so a completion of another type waits in `stash`
 * until it is asked for, as rping's CQ handler takes each by its type. */
static int rping_expect(rping_t* r, NDK_OPERATION_TYPE type, const char* what, NDK_RESULT_EX* out) {
    NDK_RESULT_EX result;
    int found = 0;
    for (int i = 0; i < r->stashed; ++i) {
        if (r->stash[i].Type != type) continue;
        result = r->stash[i];
        memmove(&r->stash[i], &r->stash[i + 1], sizeof(result) * (size_t)(r->stashed - i - 1));
        --r->stashed;
        found = 1;
        break;
    }
    while (!found) {
        if (!rping_poll(r, &result)) return 0;
        if (result.Status == STATUS_SUCCESS && result.Type != type && r->stashed < RPING_STASH) {
            r->stash[r->stashed++] = result;
            continue;
        }
        found = 1;
    }
    if (result.Status != STATUS_SUCCESS || result.Type != type) {
        const char* name = SoftNdkStatusName(result.Status);
        char cause[160];
        SoftNdkFormatProviderError(result.ProviderErrorCode, cause, sizeof(cause));
        fprintf(stderr, "ndkping --rping: %s failed: %s (0x%08X), type %d, cause %s\n", what, name ? name : "NTSTATUS",
                (unsigned)result.Status, (int)result.Type, cause);
        exit(1);
    }
    if (type == NdkOperationTypeReceive && result.BytesTransferred != RPING_INFO) {
        fprintf(stderr, "ndkping --rping: Received bogus data, size %u\n", (unsigned)result.BytesTransferred);
        exit(1);
    }
    if (out != NULL) *out = result;
    return 1;
}

/* rping's ping data for iteration `ping` (rping.c): "rdma-ping-%d: ", then characters from `start` cycling
 * 'A' … 'z', a NUL last. `start` advances per iteration. */
static void rping_pattern(unsigned char* buffer, ULONG size, int ping, int start) {
    const int written = snprintf((char*)buffer, size, "rdma-ping-%d: ", ping);
    for (int i = written, c = start; i < (int)size; ++i) {
        buffer[i] = (unsigned char)c;
        if (++c > 122) c = 65;
    }
    buffer[size - 1] = 0;
}

/* struct rping_rdma_info: buf (be64), rkey (be32), size (be32). */
static void rping_send_info(rping_t* r, const void* buffer, ULONG size) {
    const uint64_t address = htobe64((uint64_t)(uintptr_t)buffer);
    const uint32_t token = htobe32(r->mr->Dispatch->NdkGetRemoteTokenFromMr(r->mr));
    const uint32_t length = htobe32(size);
    memcpy(r->send, &address, 8);
    memcpy(r->send + 8, &token, 4);
    memcpy(r->send + 12, &length, 4);
    NDK_SGE s = rping_sge(r, r->send, RPING_INFO);
    ndk_check(r->qp->Dispatch->NdkSend(r->qp, NULL, &s, 1, 0), "NdkSend");
    rping_expect(r, NdkOperationTypeSend, "send", NULL);
}

static int rping_server(rping_t* r, const SOCKADDR_INET* address, ULONG length, int count, ULONG size, int verbose,
                        int validate) {
    ndk_wait_t wait = {0};
    r->listener = ndk_created(&wait,
                              r->adapter->Dispatch->NdkCreateListener(r->adapter, rping_on_connect, NULL,
                                                                      ndk_wait_on_create, &wait, &r->listener),
                              &r->listener, "NdkCreateListener");
    memset(&wait, 0, sizeof(wait));
    ndk_check(ndk_wait(&wait, r->listener->Dispatch->NdkListen(r->listener, (PSOCKADDR)address, length,
                                                               ndk_wait_on_request, &wait)),
              "NdkListen");
    printf("ndkping --rping: server listening on port %u\n",
           (unsigned)ntohs(address->si_family == AF_INET ? address->Ipv4.sin_port : address->Ipv6.sin6_port));
    while (atomic_load(&g_rping_incoming) == NULL) usleep(100);
    r->connector = atomic_load(&g_rping_incoming);
    ULONG inbound = 0, outbound = 0, data = 0;
    ndk_check(r->connector->Dispatch->NdkGetConnectionData(r->connector, &inbound, &outbound, NULL, &data),
              "NdkGetConnectionData");
    if (r->debug) printf("ndkping --rping: connect request, peer IRD/ORD %u/%u\n", outbound, inbound);
    rping_post_receive(r);
    ndk_wait_t accepted = {0};
    ndk_check(ndk_wait(&accepted,
                       r->connector->Dispatch->NdkAccept(r->connector, r->qp, inbound, outbound, NULL, 0,
                                                         rping_on_disconnect, NULL, ndk_wait_on_request, &accepted)),
              "NdkAccept");
    if (r->debug) printf("ndkping --rping: accepted\n");
    int done = 0;
    NDK_RESULT_EX result;
    unsigned char* expected = malloc(size);
    if (expected == NULL) ndk_check(STATUS_INSUFFICIENT_RESOURCES, "malloc");
    for (; count == 0 || done < count; ++done) {
        /* the client's start_buf: Read it */
        if (!rping_expect(r, NdkOperationTypeReceive, "receive", &result)) break;
        uint64_t remote_address;
        uint32_t remote_token, remote_length;
        memcpy(&remote_address, r->receive, 8);
        memcpy(&remote_token, r->receive + 8, 4);
        memcpy(&remote_length, r->receive + 12, 4);
        remote_address = be64toh(remote_address);
        remote_token = be32toh(remote_token);
        remote_length = be32toh(remote_length);
        if (remote_length > size) {
            fprintf(stderr, "ndkping --rping: the client's size %u is above this server's -S %u\n", remote_length,
                    size);
            free(expected);
            return 1;
        }
        rping_post_receive(r);
        NDK_SGE sink = rping_sge(r, r->rdma_buf, remote_length);
        ndk_check(r->qp->Dispatch->NdkRead(r->qp, NULL, &sink, 1, remote_address, remote_token, 0), "NdkRead");
        if (!rping_expect(r, NdkOperationTypeRead, "rdma read", NULL)) break;
        if (validate) { /* the client's start_buf for this iteration, as rping builds it */
            rping_pattern(expected, remote_length, done, 65 + done % 58);
            if (memcmp(expected, r->rdma_buf, remote_length) != 0) {
                fprintf(stderr, "ndkping --rping: data mismatch in iteration %d\n", done);
                free(expected);
                return 1;
            }
        }
        if (verbose) printf("server ping data: %s\n", (const char*)r->rdma_buf);
        memset(r->send, 0, RPING_INFO); /* the go-ahead: 16 bytes, content ignored */
        NDK_SGE go = rping_sge(r, r->send, RPING_INFO);
        ndk_check(r->qp->Dispatch->NdkSend(r->qp, NULL, &go, 1, 0), "NdkSend");
        if (!rping_expect(r, NdkOperationTypeSend, "send", NULL)) break;
        /* the client's rdma_buf: Write ours there */
        if (!rping_expect(r, NdkOperationTypeReceive, "receive", &result)) break;
        memcpy(&remote_address, r->receive, 8);
        memcpy(&remote_token, r->receive + 8, 4);
        remote_address = be64toh(remote_address);
        remote_token = be32toh(remote_token);
        rping_post_receive(r);
        NDK_SGE source = rping_sge(r, r->rdma_buf, (ULONG)strnlen((const char*)r->rdma_buf, remote_length - 1) + 1);
        ndk_check(r->qp->Dispatch->NdkWrite(r->qp, NULL, &source, 1, remote_address, remote_token, 0), "NdkWrite");
        if (!rping_expect(r, NdkOperationTypeWrite, "rdma write", NULL)) break;
        ndk_check(r->qp->Dispatch->NdkSend(r->qp, NULL, &go, 1, 0), "NdkSend");
        if (!rping_expect(r, NdkOperationTypeSend, "send", NULL)) break;
    }
    /* rping's server never ends a connection: its client disconnects after its last iteration. Wait for that
     * (rping's client can hang when the server disconnects first), then answer it. */
    for (int waited = 0; waited < 10000 && !atomic_load(&g_rping_disconnected); ++waited) usleep(1000);
    ndk_wait_t disconnected = {0};
    ndk_wait(&disconnected, r->connector->Dispatch->NdkDisconnect(r->connector, ndk_wait_on_request, &disconnected));
    free(expected);
    printf("ndkping --rping: server done, %d iteration%s%s\n", done, done == 1 ? "" : "s", validate ? " verified" : "");
    return count != 0 && done != count;
}

static int rping_client(rping_t* r, const SOCKADDR_INET* address, ULONG length, int count, ULONG size, int verbose,
                        int validate) {
    ndk_wait_t wait = {0};
    r->connector = ndk_created(
        &wait, r->adapter->Dispatch->NdkCreateConnector(r->adapter, ndk_wait_on_create, &wait, &r->connector),
        &r->connector, "NdkCreateConnector");
    SOCKADDR_INET source;
    if (!ndk_source_for(address, &source)) {
        fprintf(stderr, "ndkping --rping: no route to the server\n");
        return 1;
    }
    rping_post_receive(r);
    ndk_wait_t connected = {0}, completed = {0};
    char waiting_for[256];
    ndk_check(ndk_wait_saying(&connected,
                              r->connector->Dispatch->NdkConnect(r->connector, r->qp, (PSOCKADDR)&source, length,
                                                                 (PSOCKADDR)address, length, r->limits, r->limits, NULL,
                                                                 0, ndk_wait_on_request, &connected),
                              ndk_connect_wait_text("ndkping --rping", address, waiting_for, sizeof(waiting_for))),
              "NdkConnect");
    ndk_check(ndk_wait(&completed, r->connector->Dispatch->NdkCompleteConnect(r->connector, rping_on_disconnect, NULL,
                                                                              ndk_wait_on_request, &completed)),
              "NdkCompleteConnect");
    if (r->debug) printf("ndkping --rping: connected\n");
    int start = 65, failed = 0, done = 0;
    for (int ping = 0; count == 0 || ping < count; ++ping) {
        rping_pattern(r->start_buf, size, ping, start);
        if (++start > 122) start = 65;
        memset(r->rdma_buf, 0, size);
        rping_send_info(r, r->start_buf, size);
        if (!rping_expect(r, NdkOperationTypeReceive, "receive", NULL)) break; /* the server Read it */
        rping_post_receive(r);
        rping_send_info(r, r->rdma_buf, size);
        if (!rping_expect(r, NdkOperationTypeReceive, "receive", NULL)) break; /* the server Wrote it back */
        rping_post_receive(r);
        if (validate && memcmp(r->start_buf, r->rdma_buf, size) != 0) {
            fprintf(stderr, "data mismatch!\n");
            failed = 1;
            break;
        }
        if (verbose) printf("ping data: %s\n", (const char*)r->rdma_buf);
        ++done;
    }
    ndk_wait_t disconnected = {0};
    ndk_wait(&disconnected, r->connector->Dispatch->NdkDisconnect(r->connector, ndk_wait_on_request, &disconnected));
    printf("ndkping --rping: client done, %d iteration%s%s\n", done, done == 1 ? "" : "s", validate ? " verified" : "");
    return failed || (count != 0 && done != count);
}

int ndkping_rping_main(int argc, char** argv) {
    int server = 0, client = 0, verbose = 0, validate = 0, debug = 0, count = 0;
    ULONG limits = 1;
    unsigned port = RPING_PORT;
    unsigned long size = 64;
    const char* address_text = NULL;
    for (int i = 1; i < argc; ++i) {
        const char* arg = argv[i];
        if (strcmp(arg, "--rping") == 0) continue;
        if (strcmp(arg, "-s") == 0) {
            server = 1;
        } else if (strcmp(arg, "-c") == 0) {
            client = 1;
        } else if (strcmp(arg, "-v") == 0) {
            verbose = 1;
        } else if (strcmp(arg, "-V") == 0) {
            validate = 1;
        } else if (strcmp(arg, "-d") == 0) {
            debug = 1;
        } else if (strcmp(arg, "-a") == 0 && i + 1 < argc) {
            address_text = argv[++i];
        } else if (strcmp(arg, "-p") == 0 && i + 1 < argc) {
            port = (unsigned)strtoul(argv[++i], NULL, 0);
        } else if (strcmp(arg, "-C") == 0 && i + 1 < argc) {
            count = atoi(argv[++i]);
        } else if (strcmp(arg, "-S") == 0 && i + 1 < argc) {
            size = strtoul(argv[++i], NULL, 0);
        } else if (strcmp(arg, "--limits") == 0 && i + 1 < argc) { /* softndk's, not rping's (issue 8 §3) */
            limits = (ULONG)strtoul(argv[++i], NULL, 0);
        } else {
            fprintf(
                stderr,
                "usage: ndkping --rping -s|-c [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V] [-d] [--limits N]\n");
            return 2;
        }
    }
    if (server == client || (client && address_text == NULL) || port == 0 || port > 65535 || count < 0 ||
        size < RPING_MIN_SIZE || size > RPING_MAX_SIZE || limits < 1 || limits > 128) {
        fprintf(stderr, "ndkping --rping: one of -s or -c, a client's -a, a port, -S %d … %d and --limits 1 … 128\n",
                RPING_MIN_SIZE, RPING_MAX_SIZE);
        return 2;
    }
    if (address_text == NULL) address_text = "0.0.0.0";
    SOCKADDR_INET address;
    char resolve_error[256];
    const ULONG length =
        (ULONG)ndk_resolve(address_text, (unsigned)port, AF_UNSPEC, &address, resolve_error, sizeof(resolve_error));
    if (length == 0) {
        fprintf(stderr, "ndkping --rping: -a: %s\n", resolve_error);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    rping_t r;
    memset(&r, 0, sizeof(r));
    r.debug = debug;
    rping_open(&r, (ULONG)size);
    r.limits = limits;
    const int status = server ? rping_server(&r, &address, length, count, (ULONG)size, verbose, validate)
                              : rping_client(&r, &address, length, count, (ULONG)size, verbose, validate);
    rping_close(&r);
    return status;
}
