/* ndkping: like rping. A server and a client (two adapters in this process) connect over a listener address.
 * Each iteration: the client sends a ping; the server fast-registers its buffer and sends back the token; the
 * client RDMA-writes a pattern there, reads it back, and both sides verify it; the client's send-and-invalidate
 * retires the token. Prints a line per iteration and a summary.
 * Usage: ndkping [-c count] [-s size] [-a address] [--pend|--random] */
#include <arpa/inet.h>
#include <sys/mman.h>

#include "ndk_wait.h"

#define MAX_SIZE (64 * 1024)
#define PAGES (MAX_SIZE / PAGE_SIZE)

typedef struct {
    UINT64 address;
    UINT32 token;
    UINT32 length;
} control_t;

typedef struct {
    NDK_ADAPTER* adapter;
    NDK_PD* pd;
    NDK_CQ* cq;
    NDK_QP* qp;
    NDK_CONNECTOR* connector;
    unsigned char* data; /* MAX_SIZE: the RDMA buffer (server) or pattern + read-back (client) */
    PMDL data_mdl;
    NDK_MR* data_mr;
    control_t* control; /* [0] to send, [1] to receive */
    PMDL control_mdl;
    NDK_MR* control_mr;
} side_t;

static NDK_CONNECTOR* volatile g_incoming;

static void on_connect(PVOID context, NDK_CONNECTOR* connector) {
    (void)context;
    g_incoming = connector;
}
static void on_cq(PVOID context, NTSTATUS status) {
    (void)context;
    (void)status;
}

/* The created object: stored through `slot` when the call completed inline, else given to the completion. */
static void* created(ndk_wait_t* wait, NTSTATUS returned, void* slot, const char* what) {
    ndk_check(ndk_wait(wait, returned), what);
    void* inline_object = *(void**)slot;
    return inline_object != NULL ? inline_object : (void*)wait->object;
}

static NDK_RESULT_EX poll_one(side_t* side) {
    NDK_RESULT_EX result;
    while (side->cq->Dispatch->NdkGetCqResultsEx(side->cq, &result, 1) == 0) {
    }
    return result;
}

static NDK_MR* register_buffer(side_t* side, void* buffer, size_t bytes, PMDL* mdl_out) {
    ndk_wait_t wait = {0};
    NDK_MR* mr = NULL;
    mr = created(&wait, side->pd->Dispatch->NdkCreateMr(side->pd, FALSE, ndk_wait_on_create, &wait, &mr), &mr,
                 "NdkCreateMr");
    PMDL mdl = IoAllocateMdl(buffer, (ULONG)bytes, FALSE, FALSE, NULL);
    MmBuildMdlForNonPagedPool(mdl);
    memset(&wait, 0, sizeof(wait));
    ndk_check(ndk_wait(&wait, mr->Dispatch->NdkRegisterMr(mr, mdl, bytes, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                                          ndk_wait_on_request, &wait)),
              "NdkRegisterMr");
    *mdl_out = mdl;
    return mr;
}

static void open_side(side_t* side, ULONG mode) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    config.CompletionMode = mode;
    ndk_check(SoftNdkOpenAdapter(&config, &side->adapter), "SoftNdkOpenAdapter");
    ndk_wait_t wait = {0};
    side->pd = created(&wait, side->adapter->Dispatch->NdkCreatePd(side->adapter, ndk_wait_on_create, &wait, &side->pd),
                       &side->pd, "NdkCreatePd");
    memset(&wait, 0, sizeof(wait));
    side->cq = created(&wait,
                       side->adapter->Dispatch->NdkCreateCq(side->adapter, 64, on_cq, NULL, NULL, ndk_wait_on_create,
                                                            &wait, &side->cq),
                       &side->cq, "NdkCreateCq");
    memset(&wait, 0, sizeof(wait));
    side->qp = created(&wait,
                       side->pd->Dispatch->NdkCreateQp(side->pd, side->cq, side->cq, side, 16, 16, 2, 2, 0,
                                                       ndk_wait_on_create, &wait, &side->qp),
                       &side->qp, "NdkCreateQp");
    side->data = ExAllocatePool2(POOL_FLAG_NON_PAGED, 2 * MAX_SIZE, 0);
    side->control = ExAllocatePool2(POOL_FLAG_NON_PAGED, PAGE_SIZE, 0);
    side->data_mr = register_buffer(side, side->data, 2 * MAX_SIZE, &side->data_mdl);
    side->control_mr = register_buffer(side, side->control, PAGE_SIZE, &side->control_mdl);
}

static NDK_SGE sge(NDK_MR* mr, void* address, ULONG length) {
    NDK_SGE s;
    s.VirtualAddress = address;
    s.Length = length;
    s.MemoryRegionToken = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    return s;
}

static void post_control_receive(side_t* side) {
    NDK_SGE s = sge(side->control_mr, &side->control[1], sizeof(control_t));
    ndk_check(side->qp->Dispatch->NdkReceive(side->qp, NULL, &s, 1), "NdkReceive");
}

static int parse_address(const char* text, SOCKADDR_INET* address) {
    memset(address, 0, sizeof(*address));
    if (inet_pton(AF_INET, text, &address->Ipv4.sin_addr) == 1) {
        address->Ipv4.sin_family = AF_INET;
        return sizeof(SOCKADDR_IN);
    }
    if (inet_pton(AF_INET6, text, &address->Ipv6.sin6_addr) == 1) {
        address->Ipv6.sin6_family = AF_INET6;
        return sizeof(SOCKADDR_IN6);
    }
    return 0;
}

int main(int argc, char** argv) {
    int count = 5;
    ULONG size = 4096;
    const char* address_text = "127.0.0.1";
    ULONG mode = ndk_parse_mode(argc, argv);
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
            count = atoi(argv[++i]);
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            size = (ULONG)strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "-a") == 0 && i + 1 < argc)
            address_text = argv[++i];
        else if (strcmp(argv[i], "--pend") != 0 && strcmp(argv[i], "--random") != 0) {
            fprintf(stderr, "usage: ndkping [-c count] [-s size<=%d] [-a address] [--pend|--random]\n", MAX_SIZE);
            return 2;
        }
    }
    SOCKADDR_INET address;
    int address_length = parse_address(address_text, &address);
    if (size == 0 || size > MAX_SIZE || count <= 0 || address_length == 0) {
        fprintf(stderr, "ndkping: bad size, count or address\n");
        return 2;
    }
    side_t server = {0}, client = {0};
    open_side(&server, mode);
    open_side(&client, mode);

    /* Server: listen; client: connect; server: accept. */
    ndk_wait_t wait = {0};
    NDK_LISTENER* listener = NULL;
    listener = created(&wait,
                       server.adapter->Dispatch->NdkCreateListener(server.adapter, on_connect, NULL, ndk_wait_on_create,
                                                                   &wait, &listener),
                       &listener, "NdkCreateListener");
    memset(&wait, 0, sizeof(wait));
    ndk_check(ndk_wait(&wait, listener->Dispatch->NdkListen(listener, (PSOCKADDR)&address, (ULONG)address_length,
                                                            ndk_wait_on_request, &wait)),
              "NdkListen");
    SOCKADDR_INET bound;
    ULONG bound_length = sizeof(bound);
    ndk_check(listener->Dispatch->NdkGetLocalAddress(listener, (PSOCKADDR)&bound, &bound_length), "NdkGetLocalAddress");
    char text[INET6_ADDRSTRLEN];
    inet_ntop(bound.si_family, bound.si_family == AF_INET ? (void*)&bound.Ipv4.sin_addr : (void*)&bound.Ipv6.sin6_addr,
              text, sizeof(text));
    const unsigned port = ntohs(bound.si_family == AF_INET ? bound.Ipv4.sin_port : bound.Ipv6.sin6_port);
    static const char* modes[] = {"inline", "pend", "random"};
    printf("ndkping: server listening on %s port %u; %d iterations of %u bytes, %s completions\n", text, port, count,
           size, modes[mode]);

    memset(&wait, 0, sizeof(wait));
    client.connector = created(
        &wait,
        client.adapter->Dispatch->NdkCreateConnector(client.adapter, ndk_wait_on_create, &wait, &client.connector),
        &client.connector, "NdkCreateConnector");
    SOCKADDR_INET source = address;
    if (source.si_family == AF_INET)
        source.Ipv4.sin_port = 0;
    else
        source.Ipv6.sin6_port = 0;
    post_control_receive(&server);
    post_control_receive(&client);
    ndk_wait_t connected = {0}, accepted = {0}, completed = {0};
    NTSTATUS connect_returned = client.connector->Dispatch->NdkConnect(
        client.connector, client.qp, (PSOCKADDR)&source, (ULONG)address_length, (PSOCKADDR)&bound, bound_length, 4, 4,
        (PVOID) "ndkping", 8, ndk_wait_on_request, &connected);
    while (g_incoming == NULL) sched_yield();
    server.connector = g_incoming;
    NTSTATUS accept_returned = server.connector->Dispatch->NdkAccept(server.connector, server.qp, 4, 4, NULL, 0, NULL,
                                                                     NULL, ndk_wait_on_request, &accepted);
    ndk_check(ndk_wait(&connected, connect_returned), "NdkConnect");
    ndk_check(ndk_wait(&completed, client.connector->Dispatch->NdkCompleteConnect(client.connector, NULL, NULL,
                                                                                  ndk_wait_on_request, &completed)),
              "NdkCompleteConnect");
    ndk_check(ndk_wait(&accepted, accept_returned), "NdkAccept");

    /* Server: a LAM over its RDMA buffer and a fast-register MR. */
    ULONG lam_size = NDK_LAM_SIZE(PAGES), fbo = 0;
    NDK_LOGICAL_ADDRESS_MAPPING* lam = malloc(lam_size);
    memset(&wait, 0, sizeof(wait));
    ndk_check(ndk_wait(&wait, server.adapter->Dispatch->NdkBuildLAM(server.adapter, server.data_mdl, MAX_SIZE,
                                                                    ndk_wait_on_request, &wait, lam, &lam_size, &fbo)),
              "NdkBuildLAM");
    memset(&wait, 0, sizeof(wait));
    NDK_MR* fast = NULL;
    fast = created(&wait, server.pd->Dispatch->NdkCreateMr(server.pd, TRUE, ndk_wait_on_create, &wait, &fast), &fast,
                   "NdkCreateMr");
    memset(&wait, 0, sizeof(wait));
    ndk_check(
        ndk_wait(&wait, fast->Dispatch->NdkInitializeFastRegisterMr(fast, PAGES, TRUE, ndk_wait_on_request, &wait)),
        "NdkInitializeFastRegisterMr");

    double total = 0, best = 1e30, worst = 0;
    int verified = 0;
    for (int i = 1; i <= count; ++i) {
        const double start = ndk_now_ns();
        for (ULONG b = 0; b < size; ++b) client.data[b] = (unsigned char)(i * 31 + b * 7);
        /* 1. ping */
        client.control[0] = (control_t){0, 0, size};
        NDK_SGE ping = sge(client.control_mr, &client.control[0], sizeof(control_t));
        ndk_check(client.qp->Dispatch->NdkSend(client.qp, NULL, &ping, 1, 0), "NdkSend");
        ndk_check(poll_one(&client).Status, "ping send");
        ndk_check(poll_one(&server).Status, "ping receive");
        post_control_receive(&server);
        /* 2. server fast-registers its buffer and answers with the token */
        const UINT64 base = 0x100000000000ull * (UINT64)(i % 7 + 1);
        ndk_check(server.qp->Dispatch->NdkFastRegister(server.qp, NULL, fast, PAGES, lam->AdapterPageArray, 0, MAX_SIZE,
                                                       (PVOID)base,
                                                       NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ),
                  "NdkFastRegister");
        ndk_check(poll_one(&server).Status, "fast register");
        const UINT32 token = fast->Dispatch->NdkGetRemoteTokenFromMr(fast);
        server.control[0] = (control_t){base, token, size};
        NDK_SGE pong = sge(server.control_mr, &server.control[0], sizeof(control_t));
        ndk_check(server.qp->Dispatch->NdkSend(server.qp, NULL, &pong, 1, 0), "NdkSend");
        ndk_check(poll_one(&server).Status, "pong send");
        ndk_check(poll_one(&client).Status, "pong receive");
        post_control_receive(&client);
        const control_t offer = client.control[1];
        /* 3. RDMA write, then read back into the second half */
        NDK_SGE out = sge(client.data_mr, client.data, size);
        ndk_check(client.qp->Dispatch->NdkWrite(client.qp, NULL, &out, 1, offer.address, offer.token, 0), "NdkWrite");
        ndk_check(poll_one(&client).Status, "RDMA write");
        memset(client.data + MAX_SIZE, 0, size);
        NDK_SGE back = sge(client.data_mr, client.data + MAX_SIZE, size);
        ndk_check(client.qp->Dispatch->NdkRead(client.qp, NULL, &back, 1, offer.address, offer.token, 0), "NdkRead");
        ndk_check(poll_one(&client).Status, "RDMA read");
        const int ok =
            memcmp(client.data, client.data + MAX_SIZE, size) == 0 && memcmp(client.data, server.data, size) == 0;
        /* 4. send-and-invalidate retires the token at the server */
        ndk_check(client.qp->Dispatch->NdkSendAndInvalidate(client.qp, NULL, &ping, 1, 0, offer.token),
                  "NdkSendAndInvalidate");
        ndk_check(poll_one(&client).Status, "send-and-invalidate");
        NDK_RESULT_EX invalidated = poll_one(&server);
        ndk_check(invalidated.Status, "receive-and-invalidate");
        post_control_receive(&server);
        const double micros = (ndk_now_ns() - start) / 1000.0;
        total += micros;
        best = micros < best ? micros : best;
        worst = micros > worst ? micros : worst;
        verified += ok;
        printf(
            "ping %d: send ok, fast-register token 0x%08x, write %u B ok, read ok, %s, invalidated 0x%08x, %.1f us\n",
            i, token, size, ok ? "verified" : "MISMATCH", (unsigned)invalidated.TypeSpecificCompletionOutput, micros);
    }
    printf("--- ndkping statistics ---\n%d iterations, %d verified, %d errors, min/avg/max = %.1f/%.1f/%.1f us\n",
           count, verified, count - verified, best, total / count, worst);

    /* Clean up, children first. */
    NDK_OBJECT_HEADER* objects[] = {
        &client.connector->Header, &server.connector->Header,  &listener->Header,       &fast->Header,
        &client.qp->Header,        &server.qp->Header,         &client.data_mr->Header, &client.control_mr->Header,
        &server.data_mr->Header,   &server.control_mr->Header, &client.cq->Header,      &server.cq->Header,
        &client.pd->Header,        &server.pd->Header};
    for (size_t i = 0; i < sizeof(objects) / sizeof(objects[0]); ++i) {
        memset(&wait, 0, sizeof(wait));
        NDK_FN_CLOSE_OBJECT close = *(NDK_FN_CLOSE_OBJECT const*)((NDK_PD*)objects[i])->Dispatch;
        ndk_check(ndk_wait(&wait, close(objects[i], ndk_wait_on_close, &wait)), "close");
    }
    server.adapter->Dispatch->NdkReleaseLAM(server.adapter, lam);
    free(lam);
    side_t* sides[] = {&client, &server};
    for (int i = 0; i < 2; ++i) {
        IoFreeMdl(sides[i]->data_mdl);
        IoFreeMdl(sides[i]->control_mdl);
        ExFreePool(sides[i]->data);
        ExFreePool(sides[i]->control);
        ndk_check(SoftNdkCloseAdapter(sides[i]->adapter), "SoftNdkCloseAdapter");
    }
    return verified == count ? 0 : 1;
}
