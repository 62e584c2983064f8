/* first_consumer: the smallest complete NDK consumer, commented for a first read (issue 20 §3).
 *
 * One process holds both sides: a "server" adapter that listens and a "client" adapter that connects. Over the
 * in-process transport (the default) or iWARP over loopback TCP (SOFTNDK_TRANSPORT=tcp) the code is the same.
 *   1. open two adapters, each with a PD, a CQ and a QP;
 *   2. registerable memory, both ways: pool + MDL on the server, a user buffer locked through
 *      SoftNdkProbeAndLockPages on the client;
 *   3. listen, connect, accept, complete the connection;
 *   4. the server Sends its buffer's address and remote token; the client RDMA-Writes a pattern there, Sends
 *      "done", and RDMA-Reads the pattern back;
 *   5. both sides disconnect, then every object is closed, children first.
 * Usage: first_consumer [--pend | --random]   (how softndk completes calls: inline, always pending, or mixed)
 * Build: in-tree as target first_consumer, or against the installed package (samples/um/CMakeLists.txt). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include <softndk/softndk.h>

#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUFFER_BYTES (4 * PAGE_SIZE)
#define PATTERN_BYTES 1000

/* ---- Waiting for STATUS_PENDING ----
 * Every NDK call that may pend takes a completion callback and a context. If the call returns STATUS_PENDING,
 * its result arrives later through the callback, on a provider thread; any other return value is the result
 * itself, and the callback is not called. `waiter_t` is a context for one call, and finish() turns either case
 * into the final status. Nothing waits for ever: a call that does not complete in 10 s is reported. */
typedef struct {
    atomic_int done;
    NTSTATUS status;
    NDK_OBJECT_HEADER* object; /* for the create calls: the object they deliver */
} waiter_t;

static void on_request_done(PVOID context, NTSTATUS status) {
    waiter_t* waiter = context;
    waiter->status = status;
    atomic_store(&waiter->done, 1);
}
static void on_create_done(PVOID context, NTSTATUS status, NDK_OBJECT_HEADER* object) {
    ((waiter_t*)context)->object = object;
    on_request_done(context, status);
}
static void on_close_done(PVOID context) {
    on_request_done(context, STATUS_SUCCESS);
}

static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static void check(NTSTATUS status, const char* what) {
    if (NT_SUCCESS(status)) return;
    const char* name = SoftNdkStatusName(status); /* e.g. "STATUS_CONNECTION_REFUSED" */
    fprintf(stderr, "first_consumer: %s failed: %s (0x%08X): %s\n", what, name ? name : "NTSTATUS", (unsigned)status,
            SoftNdkGetLastErrorText()); /* softndk's reason, in words */
    exit(1);
}

static NTSTATUS finish(waiter_t* waiter, NTSTATUS returned, const char* what) {
    if (returned != STATUS_PENDING) return returned; /* completed inline: the callback will not run */
    const double deadline = now_seconds() + 10;
    while (!atomic_load(&waiter->done)) {
        if (now_seconds() > deadline) {
            fprintf(stderr, "first_consumer: %s has not completed in 10 s\n", what);
            exit(1);
        }
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
    return waiter->status;
}

/* A create call delivers its object in *slot when it completes inline, or through the callback when it pends. */
static void* create(NTSTATUS returned, waiter_t* waiter, void** slot, const char* what) {
    check(finish(waiter, returned, what), what);
    return *slot != NULL ? *slot : (void*)waiter->object;
}

/* Closing: every object's dispatch table starts with its close function. */
static void close_object(NDK_OBJECT_HEADER* object, const char* what) {
    waiter_t waiter = {0};
    NDK_FN_CLOSE_OBJECT close = *(NDK_FN_CLOSE_OBJECT const*)((NDK_PD*)object)->Dispatch;
    check(finish(&waiter, close(object, on_close_done, &waiter), what), what);
}

/* ---- One side: adapter, PD, CQ, QP, and a registered buffer ---- */
typedef struct {
    NDK_ADAPTER* adapter;
    NDK_PD* pd;
    NDK_CQ* cq;
    NDK_QP* qp;
    NDK_CONNECTOR* connector;
    unsigned char* buffer;
    int buffer_from_pool; /* 1: ExAllocatePool2; 0: a user buffer from aligned_alloc */
    PMDL mdl;
    NDK_MR* mr;
    UINT32 local_token;
} side_t;

static void on_cq_notification(PVOID context, NTSTATUS status) {
    (void)context;
    (void)status;
}

static void open_side(side_t* side, ULONG completion_mode) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config); /* defaults, then SOFTNDK_* environment variables */
    config.CompletionMode = completion_mode;
    check(SoftNdkOpenAdapter(&config, &side->adapter), "SoftNdkOpenAdapter");
    waiter_t w1 = {0}, w2 = {0}, w3 = {0};
    side->pd = create(side->adapter->Dispatch->NdkCreatePd(side->adapter, on_create_done, &w1, &side->pd), &w1,
                      (void**)&side->pd, "NdkCreatePd");
    /* One CQ for sends and receives. Its notification callback runs after NdkArmCq when a completion arrives;
     * this sample polls instead and never arms, but the callback is required. */
    side->cq = create(side->adapter->Dispatch->NdkCreateCq(side->adapter, 16, on_cq_notification, NULL, NULL,
                                                           on_create_done, &w2, &side->cq),
                      &w2, (void**)&side->cq, "NdkCreateCq");
    /* 4 receives, 4 initiator requests, 1 SGE each way, 0 inline bytes. */
    side->qp = create(side->pd->Dispatch->NdkCreateQp(side->pd, side->cq, side->cq, side, 4, 4, 1, 1, 0, on_create_done,
                                                      &w3, &side->qp),
                      &w3, (void**)&side->qp, "NdkCreateQp");
}

/* ---- Registerable memory ----
 * NdkRegisterMr takes an MDL describing locked pages. Two ways to get one:
 *  - pool: ExAllocatePool2 returns locked memory (as nonpaged pool is), MmBuildMdlForNonPagedPool describes it;
 *  - a user buffer: any page-aligned memory, locked with SoftNdkProbeAndLockPages (MmProbeAndLockPages's form
 *    that returns a status instead of raising). Locking counts against `ulimit -l`; a refusal names it. */
static void register_buffer(side_t* side, int from_pool, ULONG flags) {
    side->buffer_from_pool = from_pool;
    if (from_pool) {
        side->buffer = ExAllocatePool2(POOL_FLAG_NON_PAGED, BUFFER_BYTES, 0x706d6153 /* pool tag "Samp" */);
        if (side->buffer == NULL) check(STATUS_INSUFFICIENT_RESOURCES, "ExAllocatePool2");
        side->mdl = IoAllocateMdl(side->buffer, BUFFER_BYTES, FALSE, FALSE, NULL);
        MmBuildMdlForNonPagedPool(side->mdl);
    } else {
        side->buffer = aligned_alloc(PAGE_SIZE, BUFFER_BYTES);
        memset(side->buffer, 0, BUFFER_BYTES);
        side->mdl = IoAllocateMdl(side->buffer, BUFFER_BYTES, FALSE, FALSE, NULL);
        check(SoftNdkProbeAndLockPages(side->mdl, KernelMode, IoWriteAccess), "SoftNdkProbeAndLockPages");
    }
    waiter_t created = {0}, registered = {0};
    side->mr = create(side->pd->Dispatch->NdkCreateMr(side->pd, FALSE, on_create_done, &created, &side->mr), &created,
                      (void**)&side->mr, "NdkCreateMr");
    check(finish(
              &registered,
              side->mr->Dispatch->NdkRegisterMr(side->mr, side->mdl, BUFFER_BYTES, flags, on_request_done, &registered),
              "NdkRegisterMr"),
          "NdkRegisterMr");
    side->local_token = side->mr->Dispatch->NdkGetLocalTokenFromMr(side->mr);
}

static NDK_SGE sge(side_t* side, size_t offset, ULONG length) {
    NDK_SGE entry;
    entry.VirtualAddress = side->buffer + offset;
    entry.Length = length;
    entry.MemoryRegionToken = side->local_token;
    return entry;
}

/* Polls the side's CQ for one completion (10 s at most) and checks its type and status. */
static NDK_RESULT_EX next_completion(side_t* side, NDK_OPERATION_TYPE expected, const char* what) {
    NDK_RESULT_EX result;
    const double deadline = now_seconds() + 10;
    while (side->cq->Dispatch->NdkGetCqResultsEx(side->cq, &result, 1) == 0) {
        if (now_seconds() > deadline) {
            fprintf(stderr, "first_consumer: no completion for the %s in 10 s\n", what);
            exit(1);
        }
    }
    check(result.Status, what);
    if (result.Type != expected) {
        fprintf(stderr, "first_consumer: the %s completed as type 0x%x\n", what, (unsigned)result.Type);
        exit(1);
    }
    return result;
}

/* The server's message to the client: where to write, and the token that allows it. */
typedef struct {
    UINT64 address;
    UINT32 remote_token;
} offer_t;

static _Atomic(NDK_CONNECTOR*) g_incoming; /* set by the listener's connect event */
static atomic_int g_peer_disconnected;     /* set by the server's disconnect event */

static void on_connect_request(PVOID context, NDK_CONNECTOR* connector) {
    (void)context;
    atomic_store(&g_incoming, connector);
}
static void on_disconnect_event(PVOID context) {
    (void)context;
    atomic_store(&g_peer_disconnected, 1);
}

int main(int argc, char** argv) {
    ULONG mode = SOFTNDK_COMPLETION_INLINE;
    if (argc > 1 && strcmp(argv[1], "--pend") == 0) mode = SOFTNDK_COMPLETION_PEND;
    if (argc > 1 && strcmp(argv[1], "--random") == 0) mode = SOFTNDK_COMPLETION_RANDOM;
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* 1-2. Two sides. The server's buffer allows remote Write and Read; the client's only local access. */
    side_t server = {0}, client = {0};
    open_side(&server, mode);
    open_side(&client, mode);
    register_buffer(&server, 1,
                    NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE);
    register_buffer(&client, 0, NDK_MR_FLAG_ALLOW_LOCAL_WRITE);

    /* 3. Listen on 127.0.0.1, port 0: the provider picks a port, read back with NdkGetListenerLocalAddress. */
    waiter_t w = {0};
    NDK_LISTENER* listener = NULL;
    listener = create(server.adapter->Dispatch->NdkCreateListener(server.adapter, on_connect_request, NULL,
                                                                  on_create_done, &w, &listener),
                      &w, (void**)&listener, "NdkCreateListener");
    SOCKADDR_IN address = {0};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(&w, 0, sizeof(w));
    check(finish(&w, listener->Dispatch->NdkListen(listener, (PSOCKADDR)&address, sizeof(address), on_request_done, &w),
                 "NdkListen"),
          "NdkListen");
    ULONG address_length = sizeof(address);
    check(listener->Dispatch->NdkGetLocalAddress(listener, (PSOCKADDR)&address, &address_length), "NdkGetLocalAddress");
    printf("listening on 127.0.0.1 port %u\n", ntohs(address.sin_port));

    /* The connect / accept / complete order:
     *  client NdkConnect ........ pends until the server accepts (or refuses)
     *  server's connect event ... hands over a new connector; the server NdkAccepts it with its QP
     *  client NdkCompleteConnect  once NdkConnect completed: the connection is up on both sides
     * A receive that the peer's first Send needs must be posted before the connection is up. */
    NDK_SGE receive = sge(&client, PAGE_SIZE, sizeof(offer_t));
    check(client.qp->Dispatch->NdkReceive(client.qp, (PVOID)1, &receive, 1), "NdkReceive");
    memset(&w, 0, sizeof(w));
    client.connector =
        create(client.adapter->Dispatch->NdkCreateConnector(client.adapter, on_create_done, &w, &client.connector), &w,
               (void**)&client.connector, "NdkCreateConnector");
    SOCKADDR_IN source = {0}; /* our address, port 0: the provider picks one */
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    waiter_t connected = {0}, accepted = {0}, completed = {0};
    const NTSTATUS connect_returned = client.connector->Dispatch->NdkConnect(
        client.connector, client.qp, (PSOCKADDR)&source, sizeof(source), (PSOCKADDR)&address, sizeof(address), 1, 1,
        NULL, 0, on_request_done, &connected);
    check(connect_returned, "NdkConnect");
    const double deadline = now_seconds() + 10;
    while (atomic_load(&g_incoming) == NULL)
        if (now_seconds() > deadline) check(STATUS_IO_TIMEOUT, "waiting for the connect event");
    server.connector = atomic_load(&g_incoming);
    const NTSTATUS accept_returned = server.connector->Dispatch->NdkAccept(
        server.connector, server.qp, 1, 1, NULL, 0, on_disconnect_event, NULL, on_request_done, &accepted);
    check(finish(&connected, connect_returned, "NdkConnect"), "NdkConnect");
    check(finish(
              &completed,
              client.connector->Dispatch->NdkCompleteConnect(client.connector, NULL, NULL, on_request_done, &completed),
              "NdkCompleteConnect"),
          "NdkCompleteConnect");
    check(finish(&accepted, accept_returned, "NdkAccept"), "NdkAccept");
    printf("connected\n");

    /* 4a. The server Sends where to write and the remote token; it first posts a receive for the "done". */
    NDK_SGE done_receive = sge(&server, PAGE_SIZE, 16);
    check(server.qp->Dispatch->NdkReceive(server.qp, (PVOID)2, &done_receive, 1), "NdkReceive");
    offer_t* offer = (offer_t*)server.buffer;
    offer->address = (UINT64)(uintptr_t)(server.buffer + 2 * PAGE_SIZE);
    offer->remote_token = server.mr->Dispatch->NdkGetRemoteTokenFromMr(server.mr);
    NDK_SGE offer_sge = sge(&server, 0, sizeof(offer_t));
    check(server.qp->Dispatch->NdkSend(server.qp, (PVOID)3, &offer_sge, 1, 0), "NdkSend");
    next_completion(&server, NdkOperationTypeSend, "server's Send");
    NDK_RESULT_EX received = next_completion(&client, NdkOperationTypeReceive, "client's Receive");
    const offer_t got = *(offer_t*)(client.buffer + PAGE_SIZE);
    printf("send: %u bytes received, remote token 0x%08x\n", (unsigned)received.BytesTransferred, got.remote_token);

    /* 4b. RDMA Write of a pattern into the server's buffer. */
    for (int i = 0; i < PATTERN_BYTES; ++i) client.buffer[i] = (unsigned char)(i * 7 + 3);
    NDK_SGE pattern = sge(&client, 0, PATTERN_BYTES);
    check(client.qp->Dispatch->NdkWrite(client.qp, (PVOID)4, &pattern, 1, got.address, got.remote_token, 0),
          "NdkWrite");
    next_completion(&client, NdkOperationTypeWrite, "client's Write");
    /* What the Write's completion promises: our buffer may be reused. What it does not promise, over TCP: that the
     * bytes have landed in the server's memory (they may still be in a socket buffer). Two ways to know:
     *  - a Send after the Write: the peer's receive of it completes only after the Write's data is placed (RDMAP
     *    orders them on one QP), so the server checks its buffer when the "done" arrives;
     *  - a Read after the Write, on the same QP: its completion means the Write was placed first. */
    memcpy(client.buffer + 3 * PAGE_SIZE, "done", 5);
    NDK_SGE done = sge(&client, 3 * PAGE_SIZE, 5);
    check(client.qp->Dispatch->NdkSend(client.qp, (PVOID)5, &done, 1, 0), "NdkSend");
    next_completion(&client, NdkOperationTypeSend, "client's Send");
    next_completion(&server, NdkOperationTypeReceive, "server's Receive of \"done\"");
    if (memcmp(server.buffer + 2 * PAGE_SIZE, client.buffer, PATTERN_BYTES) != 0) {
        fprintf(stderr, "first_consumer: the Write's data is not in the server's buffer\n");
        return 1;
    }
    printf("write: %d bytes placed, seen by the server after the \"done\" Send\n", PATTERN_BYTES);

    /* 4c. RDMA Read of the same bytes back, into the client's second page. */
    NDK_SGE back = sge(&client, PAGE_SIZE, PATTERN_BYTES);
    check(client.qp->Dispatch->NdkRead(client.qp, (PVOID)6, &back, 1, got.address, got.remote_token, 0), "NdkRead");
    next_completion(&client, NdkOperationTypeRead, "client's Read");
    if (memcmp(client.buffer + PAGE_SIZE, client.buffer, PATTERN_BYTES) != 0) {
        fprintf(stderr, "first_consumer: the Read brought back other bytes\n");
        return 1;
    }
    printf("read: %d bytes back, equal\n", PATTERN_BYTES);

    /* 5. Disconnect from both sides. The client's NdkDisconnect completes only once the server disconnects
     * too (its disconnect event tells it the client did); then each side closes its objects, children first. */
    waiter_t client_gone = {0}, server_gone = {0};
    const NTSTATUS client_disconnect =
        client.connector->Dispatch->NdkDisconnect(client.connector, on_request_done, &client_gone);
    const double disconnect_deadline = now_seconds() + 10;
    while (!atomic_load(&g_peer_disconnected))
        if (now_seconds() > disconnect_deadline) check(STATUS_IO_TIMEOUT, "waiting for the disconnect event");
    check(
        finish(&server_gone, server.connector->Dispatch->NdkDisconnect(server.connector, on_request_done, &server_gone),
               "server's NdkDisconnect"),
        "server's NdkDisconnect");
    check(finish(&client_gone, client_disconnect, "client's NdkDisconnect"), "client's NdkDisconnect");
    printf("disconnected\n");

    /* Connectors first: a listener's close stays pending until the connectors it handed over are closed (CM-22). */
    close_object(&client.connector->Header, "closing the client's connector");
    close_object(&server.connector->Header, "closing the server's connector");
    close_object(&listener->Header, "closing the listener");
    side_t* sides[] = {&client, &server};
    for (int i = 0; i < 2; ++i) {
        side_t* side = sides[i];
        close_object(&side->qp->Header, "closing a QP");
        close_object(&side->mr->Header, "closing an MR");
        close_object(&side->cq->Header, "closing a CQ");
        close_object(&side->pd->Header, "closing a PD");
        if (!side->buffer_from_pool) MmUnlockPages(side->mdl);
        IoFreeMdl(side->mdl);
        if (side->buffer_from_pool)
            ExFreePool(side->buffer);
        else
            free(side->buffer);
        check(SoftNdkCloseAdapter(side->adapter), "SoftNdkCloseAdapter");
    }
    printf("first_consumer: ok\n");
    return 0;
}
