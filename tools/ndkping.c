/* ndkping: like rping. A server and a client connect over a listener address: both in this process (the
 * default), or in two processes or hosts over iWARP/TCP (--server, then --client with the server's address and
 * port). Each iteration: the client sends a ping; the server fast-registers its buffer and sends back the token;
 * the client RDMA-writes a pattern there, reads it back, and both sides verify it; the client's
 * send-and-invalidate retires the token. Prints a line per iteration and a summary.
 * Usage: ndkping [--server | --client] [-a address] [-p port] [-c count] [-s size] [--pend|--random]
 *        ndkping --rping -s|-c [rping's flags]   (rping's own protocol, for Linux siw and iWARP NICs) */
#include <arpa/inet.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ndk_args.h"
#include "ndk_route.h"
#include "ndk_wait.h"
#include "ndkping_rping.h"

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

/* Written by provider callbacks on the provider's thread, read by main: C11 atomics, not volatile (a data race). */
static _Atomic(NDK_CONNECTOR*) g_incoming;
static atomic_int g_disconnected;

static void on_disconnect(PVOID context) {
    (void)context;
    g_disconnected = 1;
}

static void on_connect(PVOID context, NDK_CONNECTOR* connector) {
    (void)context;
    g_incoming = connector;
}
static void on_cq(PVOID context, NTSTATUS status) {
    (void)context;
    (void)status;
}

/* The statistics block, as ping prints it. */
static void format_summary(char* buffer, size_t length, int done, int verified, double best, double total, double worst,
                           const char* ending) {
    if (done == 0)
        snprintf(buffer, length, "--- ndkping statistics ---\nno iterations%s\n", ending);
    else
        snprintf(buffer, length,
                 "--- ndkping statistics ---\n%d iteration%s, %d verified, %d error%s, min/avg/max = %.1f/%.1f/%.1f "
                 "us%s\n",
                 done, done == 1 ? "" : "s", verified, done - verified, done - verified == 1 ? "" : "s", best,
                 total / done, worst, ending);
}

/* SIGINT or SIGTERM: the partial statistics, then exit 128 + the signal, 130 for Ctrl-C (issue 20 §1, as ping).
 * main keeps the text current in one of two buffers and flips the index after writing the other, so the handler
 * only reads a finished text and calls write(2) and _exit, which are async-signal-safe. */
static char g_summary[2][320];
static atomic_int g_summary_index;

static void publish_summary(int done, int verified, double best, double total, double worst) {
    const int next = 1 - atomic_load(&g_summary_index);
    format_summary(g_summary[next], sizeof(g_summary[next]), done, verified, best, total, worst, " (interrupted)");
    atomic_store(&g_summary_index, next);
}

static void on_interrupt(int signal_number) {
    const char* text = g_summary[atomic_load(&g_summary_index)];
    ssize_t written = write(STDOUT_FILENO, text, strlen(text));
    (void)written;
    _exit(128 + signal_number);
}

static NDK_RESULT_EX poll_one(side_t* side) {
    NDK_RESULT_EX result;
    while (side->cq->Dispatch->NdkGetCqResultsEx(side->cq, &result, 1) == 0) {
    }
    return result;
}

static double seconds_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* The server's wait for the next message: 0 when the client disconnected instead, or sent nothing for
 * CLIENT_SILENCE_S (a client that stays connected and silent would hold the server for ever, issue 18 §4). It
 * busy-polls for the first millisecond (a ping's round trip), then sleeps 1 ms between polls: a silent
 * client costs no core (it cost 100 % before). */
#define CLIENT_SILENCE_S 60.0
static int poll_or_disconnect(side_t* side, NDK_RESULT_EX* result) {
    const double start = seconds_now();
    for (;;) {
        const int disconnected = g_disconnected; /* read before the CQ: a completion queued first is still seen */
        if (side->cq->Dispatch->NdkGetCqResultsEx(side->cq, result, 1) == 1) return 1;
        if (disconnected) return 0;
        const double waited = seconds_now() - start;
        if (waited < 0.001) continue;
        if (waited > CLIENT_SILENCE_S) {
            fprintf(stderr, "ndkping: the client sent nothing for %.0f s; ending its session\n", CLIENT_SILENCE_S);
            return 0;
        }
        usleep(1000);
    }
}

static NDK_MR* register_buffer(side_t* side, void* buffer, size_t bytes, PMDL* mdl_out) {
    ndk_wait_t wait = {0};
    NDK_MR* mr = NULL;
    mr = ndk_created(&wait, side->pd->Dispatch->NdkCreateMr(side->pd, FALSE, ndk_wait_on_create, &wait, &mr), &mr,
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
    side->pd =
        ndk_created(&wait, side->adapter->Dispatch->NdkCreatePd(side->adapter, ndk_wait_on_create, &wait, &side->pd),
                    &side->pd, "NdkCreatePd");
    memset(&wait, 0, sizeof(wait));
    side->cq = ndk_created(&wait,
                           side->adapter->Dispatch->NdkCreateCq(side->adapter, 64, on_cq, NULL, NULL,
                                                                ndk_wait_on_create, &wait, &side->cq),
                           &side->cq, "NdkCreateCq");
    memset(&wait, 0, sizeof(wait));
    side->qp = ndk_created(&wait,
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

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (strcmp(argv[i], "--rping") == 0) return ndkping_rping_main(argc, argv);
    int count = 5;
    ULONG size = 4096;
    const char* address_text = "127.0.0.1";
    unsigned port_number = 0;
    int serve = 1, ping = 1; /* both sides in this process unless --server or --client */
    ULONG mode = ndk_parse_mode(argc, argv);
    for (int i = 1; i < argc; ++i) {
        const char* flag = argv[i];
        const int has_value = i + 1 < argc;
        /* rping's habits: there -s is the server and -c the client (issue 20 §1) */
        static const char* const kRpingHint = "in rping -s means server and -c client: did you mean --rping";
        if ((strcmp(flag, "-c") == 0 || strcmp(flag, "-s") == 0 || strcmp(flag, "-a") == 0 ||
             strcmp(flag, "-p") == 0) &&
            !has_value) {
            fprintf(stderr, "ndkping: %s needs a value; see ndkping --help\n", flag);
            return 2;
        }
        if (strcmp(flag, "-c") == 0)
            count = (int)ndk_parse_count("ndkping", flag, argv[++i], 1, 100000000, kRpingHint);
        else if (strcmp(flag, "-s") == 0)
            size = (ULONG)ndk_parse_size("ndkping", flag, argv[++i], 1, MAX_SIZE, kRpingHint);
        else if (strcmp(flag, "-a") == 0)
            address_text = argv[++i];
        else if (strcmp(flag, "-p") == 0)
            port_number = (unsigned)ndk_parse_count("ndkping", flag, argv[++i], 1, 65535, NULL);
        else if (strcmp(flag, "--server") == 0)
            ping = 0;
        else if (strcmp(flag, "--client") == 0)
            serve = 0;
        else if (strcmp(flag, "-h") == 0 || strcmp(flag, "--help") == 0) {
            printf(
                "usage: ndkping [--server | --client] [-a ADDRESS] [-p PORT] [-c COUNT] [-s SIZE] [--pend|--random]\n"
                "       ndkping --rping [rping's flags]   (rping's protocol, against Linux rping)\n"
                "  both sides in this process unless --server or --client; a client needs the server's -a and -p\n"
                "  -a ADDRESS  IPv4 or IPv6 (default 127.0.0.1)     -p PORT  1-65535 (default: an ephemeral one)\n"
                "  -c COUNT    iterations (default 5)              -s SIZE  bytes, k/M units, 1-%d (default 4096)\n"
                "  --pend, --random  completion mode (default inline)\n",
                MAX_SIZE);
            return 0;
        } else if (strcmp(flag, "--pend") != 0 && strcmp(flag, "--random") != 0) {
            fprintf(stderr, "ndkping: unknown flag %s; see ndkping --help\n", flag);
            return 2;
        }
    }
    SOCKADDR_INET address;
    char resolve_error[256];
    int address_length =
        ndk_resolve(address_text, port_number, AF_UNSPEC, &address, resolve_error, sizeof(resolve_error));
    if (address_length == 0) {
        fprintf(stderr, "ndkping: -a: %s; see ndkping --help\n", resolve_error);
        return 2;
    }
    if (!serve && !ping) {
        fprintf(stderr, "ndkping: --server and --client exclude each other; see ndkping --help\n");
        return 2;
    }
    if (!serve && port_number == 0) {
        fprintf(stderr, "ndkping: --client needs the server's -a ADDRESS and -p PORT; see ndkping --help\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    publish_summary(0, 0, 0, 0, 0);
    struct sigaction interrupt = {0};
    interrupt.sa_handler = on_interrupt;
    sigaction(SIGINT, &interrupt, NULL);
    sigaction(SIGTERM, &interrupt, NULL);
    side_t server = {0}, client = {0};
    if (serve) open_side(&server, mode);
    if (ping) open_side(&client, mode);
    static const char* modes[] = {"inline", "pend", "random"};
    ndk_wait_t wait = {0};
    NDK_LISTENER* listener = NULL;
    SOCKADDR_INET bound = address;
    ULONG bound_length = (ULONG)address_length;
    if (serve) { /* listen; the connect event hands over the passive connector */
        listener = ndk_created(&wait,
                               server.adapter->Dispatch->NdkCreateListener(server.adapter, on_connect, NULL,
                                                                           ndk_wait_on_create, &wait, &listener),
                               &listener, "NdkCreateListener");
        memset(&wait, 0, sizeof(wait));
        ndk_check(ndk_wait(&wait, listener->Dispatch->NdkListen(listener, (PSOCKADDR)&address, (ULONG)address_length,
                                                                ndk_wait_on_request, &wait)),
                  "NdkListen");
        bound_length = sizeof(bound);
        ndk_check(listener->Dispatch->NdkGetLocalAddress(listener, (PSOCKADDR)&bound, &bound_length),
                  "NdkGetLocalAddress");
        char text[INET6_ADDRSTRLEN];
        inet_ntop(bound.si_family,
                  bound.si_family == AF_INET ? (void*)&bound.Ipv4.sin_addr : (void*)&bound.Ipv6.sin6_addr, text,
                  sizeof(text));
        const unsigned port = ntohs(bound.si_family == AF_INET ? bound.Ipv4.sin_port : bound.Ipv6.sin6_port);
        if (ping)
            printf("ndkping: server listening on %s port %u; %d iteration%s of %u bytes, %s completions\n", text, port,
                   count, count == 1 ? "" : "s", size, modes[mode]);
        else
            printf("ndkping: server listening on %s port %u (iWARP/TCP), %s completions\n", text, port, modes[mode]);
        post_control_receive(&server); /* two: the next ping may arrive before this side re-posts */
        post_control_receive(&server);
    }
    ndk_wait_t connected = {0}, accepted = {0}, completed = {0};
    NTSTATUS connect_returned = STATUS_SUCCESS;
    char waiting_for[256];
    if (ping) {
        memset(&wait, 0, sizeof(wait));
        client.connector = ndk_created(
            &wait,
            client.adapter->Dispatch->NdkCreateConnector(client.adapter, ndk_wait_on_create, &wait, &client.connector),
            &client.connector, "NdkCreateConnector");
        SOCKADDR_INET source; /* where the host routes from (loopback for loopback, else the interface's address) */
        if (!ndk_source_for(&bound, &source)) {
            fprintf(stderr, "ndkping: no route to the server\n");
            return 1;
        }
        if (!serve) {
            char text[INET6_ADDRSTRLEN];
            inet_ntop(bound.si_family,
                      bound.si_family == AF_INET ? (void*)&bound.Ipv4.sin_addr : (void*)&bound.Ipv6.sin6_addr, text,
                      sizeof(text));
            printf("ndkping: client to %s port %u; %d iteration%s of %u bytes, %s completions\n", text, port_number,
                   count, count == 1 ? "" : "s", size, modes[mode]);
        }
        post_control_receive(&client);
        connect_returned = client.connector->Dispatch->NdkConnect(
            client.connector, client.qp, (PSOCKADDR)&source, (ULONG)address_length, (PSOCKADDR)&bound, bound_length, 4,
            4, (PVOID) "ndkping", 8, ndk_wait_on_request, &connected);
    }
    if (serve) {
        while (atomic_load(&g_incoming) == NULL) usleep(100);
        server.connector = atomic_load(&g_incoming);
        NTSTATUS accept_returned = server.connector->Dispatch->NdkAccept(
            server.connector, server.qp, 4, 4, NULL, 0, on_disconnect, NULL, ndk_wait_on_request, &accepted);
        if (ping) {
            ndk_check(ndk_wait_saying(&connected, connect_returned,
                                      ndk_connect_wait_text("ndkping", &bound, waiting_for, sizeof(waiting_for))),
                      "NdkConnect");
            ndk_check(ndk_wait(&completed, client.connector->Dispatch->NdkCompleteConnect(
                                               client.connector, NULL, NULL, ndk_wait_on_request, &completed)),
                      "NdkCompleteConnect");
        }
        ndk_check(ndk_wait(&accepted, accept_returned), "NdkAccept");
    } else {
        ndk_check(ndk_wait_saying(&connected, connect_returned,
                                  ndk_connect_wait_text("ndkping", &bound, waiting_for, sizeof(waiting_for))),
                  "NdkConnect");
        ndk_check(ndk_wait(&completed, client.connector->Dispatch->NdkCompleteConnect(client.connector, NULL, NULL,
                                                                                      ndk_wait_on_request, &completed)),
                  "NdkCompleteConnect");
    }

    /* Server: a LAM over its RDMA buffer and a fast-register MR. */
    ULONG lam_size = NDK_LAM_SIZE(PAGES), fbo = 0;
    NDK_LOGICAL_ADDRESS_MAPPING* lam = NULL;
    NDK_MR* fast = NULL;
    if (serve) {
        lam = malloc(lam_size);
        memset(&wait, 0, sizeof(wait));
        ndk_check(
            ndk_wait(&wait, server.adapter->Dispatch->NdkBuildLAM(server.adapter, server.data_mdl, MAX_SIZE,
                                                                  ndk_wait_on_request, &wait, lam, &lam_size, &fbo)),
            "NdkBuildLAM");
        memset(&wait, 0, sizeof(wait));
        fast = ndk_created(&wait, server.pd->Dispatch->NdkCreateMr(server.pd, TRUE, ndk_wait_on_create, &wait, &fast),
                           &fast, "NdkCreateMr");
        memset(&wait, 0, sizeof(wait));
        ndk_check(
            ndk_wait(&wait, fast->Dispatch->NdkInitializeFastRegisterMr(fast, PAGES, TRUE, ndk_wait_on_request, &wait)),
            "NdkInitializeFastRegisterMr");
    }

    double total = 0, best = 1e30, worst = 0;
    int verified = 0, done = 0;
    for (int i = 1; ping ? i <= count : 1; ++i) {
        const double start = ndk_now_ns();
        NDK_SGE ping_sge = {0};
        UINT32 token = 0;
        control_t offer = {0, 0, 0};
        int ok = 1;
        if (ping) { /* 1. ping */
            for (ULONG b = 0; b < size; ++b) client.data[b] = (unsigned char)(i * 31 + b * 7);
            client.control[0] = (control_t){(UINT64)i, 0, size}; /* the iteration rides in `address` */
            ping_sge = sge(client.control_mr, &client.control[0], sizeof(control_t));
            ndk_check(client.qp->Dispatch->NdkSend(client.qp, NULL, &ping_sge, 1, 0), "NdkSend");
            ndk_check(poll_one(&client).Status, "ping send");
        }
        ULONG length = size;
        int iteration = i;
        if (serve) { /* 2. the server fast-registers its buffer and answers with the token */
            NDK_RESULT_EX received;
            if (!poll_or_disconnect(&server, &received) || received.Status == STATUS_CANCELLED) {
                /* the client is done: it disconnected, or its stream ended and flushed the receive */
                if (!ping) printf("ndkping: the client left after %d iterations\n", done);
                break;
            }
            ndk_check(received.Status, "ping receive");
            length = server.control[1].length;
            iteration = (int)server.control[1].address;
            post_control_receive(&server);
            const UINT64 base = 0x100000000000ull * (UINT64)(iteration % 7 + 1);
            ndk_check(server.qp->Dispatch->NdkFastRegister(
                          server.qp, NULL, fast, PAGES, lam->AdapterPageArray, 0, MAX_SIZE, (PVOID)base,
                          NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ),
                      "NdkFastRegister");
            ndk_check(poll_one(&server).Status, "fast register");
            token = fast->Dispatch->NdkGetRemoteTokenFromMr(fast);
            server.control[0] = (control_t){base, token, length};
            NDK_SGE pong = sge(server.control_mr, &server.control[0], sizeof(control_t));
            ndk_check(server.qp->Dispatch->NdkSend(server.qp, NULL, &pong, 1, 0), "NdkSend");
            ndk_check(poll_one(&server).Status, "pong send");
        }
        if (ping) { /* 3. RDMA write, then read back into the second half */
            ndk_check(poll_one(&client).Status, "pong receive");
            post_control_receive(&client);
            offer = client.control[1];
            token = offer.token;
            NDK_SGE out = sge(client.data_mr, client.data, size);
            ndk_check(client.qp->Dispatch->NdkWrite(client.qp, NULL, &out, 1, offer.address, offer.token, 0),
                      "NdkWrite");
            ndk_check(poll_one(&client).Status, "RDMA write");
            memset(client.data + MAX_SIZE, 0, size);
            NDK_SGE back = sge(client.data_mr, client.data + MAX_SIZE, size);
            ndk_check(client.qp->Dispatch->NdkRead(client.qp, NULL, &back, 1, offer.address, offer.token, 0),
                      "NdkRead");
            ndk_check(poll_one(&client).Status, "RDMA read");
            ok = memcmp(client.data, client.data + MAX_SIZE, size) == 0;
            /* 4. send-and-invalidate retires the token at the server */
            ndk_check(client.qp->Dispatch->NdkSendAndInvalidate(client.qp, NULL, &ping_sge, 1, 0, offer.token),
                      "NdkSendAndInvalidate");
            ndk_check(poll_one(&client).Status, "send-and-invalidate");
        }
        UINT32 retired = token;
        if (serve) {
            NDK_RESULT_EX invalidated;
            if (!poll_or_disconnect(&server, &invalidated) || invalidated.Status == STATUS_CANCELLED) {
                if (!ping) printf("ndkping: the client left during iteration %d\n", iteration);
                break;
            }
            ndk_check(invalidated.Status, "receive-and-invalidate");
            retired = (UINT32)invalidated.TypeSpecificCompletionOutput;
            post_control_receive(&server);
            for (ULONG b = 0; b < length; ++b) /* the Write landed before the Send (RDMAP ordering) */
                if (server.data[b] != (unsigned char)(iteration * 31 + b * 7)) ok = 0;
        }
        const double micros = (ndk_now_ns() - start) / 1000.0;
        total += micros;
        best = micros < best ? micros : best;
        worst = micros > worst ? micros : worst;
        verified += ok;
        ++done;
        publish_summary(done, verified, best, total, worst);
        printf(
            "ping %d: send ok, fast-register token 0x%08x, write %u B ok, read ok, %s, invalidated 0x%08x, %.1f us\n",
            iteration, token, length, ok ? "verified" : "MISMATCH", (unsigned)retired, micros);
    }
    char summary[320];
    format_summary(summary, sizeof(summary), done, verified, best, total, worst,
                   done == 0 ? ": the client went away first" : "");
    fputs(summary, stdout);

    /* A graceful disconnect over the wire (CM-24), then clean up, children first. */
    side_t* mine = ping ? &client : &server;
    if (ping != serve) {
        memset(&wait, 0, sizeof(wait));
        NTSTATUS status =
            ndk_wait(&wait, mine->connector->Dispatch->NdkDisconnect(mine->connector, ndk_wait_on_request, &wait));
        if (status != STATUS_SUCCESS && status != STATUS_CONNECTION_INVALID) ndk_check(status, "NdkDisconnect");
    }
    NDK_OBJECT_HEADER* objects[16];
    size_t n = 0;
    if (ping) objects[n++] = &client.connector->Header;
    if (serve) objects[n++] = &server.connector->Header, objects[n++] = &listener->Header, objects[n++] = &fast->Header;
    side_t* sides[] = {&client, &server};
    for (int i = 0; i < 2; ++i) {
        if (sides[i]->adapter == NULL) continue;
        objects[n++] = &sides[i]->qp->Header;
        objects[n++] = &sides[i]->data_mr->Header;
        objects[n++] = &sides[i]->control_mr->Header;
        objects[n++] = &sides[i]->cq->Header;
        objects[n++] = &sides[i]->pd->Header;
    }
    for (size_t i = 0; i < n; ++i) {
        memset(&wait, 0, sizeof(wait));
        NDK_FN_CLOSE_OBJECT close = *(NDK_FN_CLOSE_OBJECT const*)((NDK_PD*)objects[i])->Dispatch;
        ndk_check(ndk_wait(&wait, close(objects[i], ndk_wait_on_close, &wait)), "close");
    }
    if (serve) {
        server.adapter->Dispatch->NdkReleaseLAM(server.adapter, lam);
        free(lam);
    }
    for (int i = 0; i < 2; ++i) {
        if (sides[i]->adapter == NULL) continue;
        IoFreeMdl(sides[i]->data_mdl);
        IoFreeMdl(sides[i]->control_mdl);
        ExFreePool(sides[i]->data);
        ExFreePool(sides[i]->control);
        ndk_check(SoftNdkCloseAdapter(sides[i]->adapter), "SoftNdkCloseAdapter");
    }
    return done > 0 && verified == done ? 0 : 1;
}
