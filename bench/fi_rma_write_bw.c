/* The libfabric baseline of issue 7 §8: RMA write bandwidth over libfabric's tcp provider (FI_EP_MSG) between
 * two processes on loopback, measured the way ndkperf measures its writes: a window of fi_write requests in
 * flight for a fixed time, then a message round trip so that every write has landed before the clock stops.
 * Debian ships no fabtests (no fi_rma_bw), so this is ours, on the public libfabric API only.
 * Usage: fi_rma_write_bw [--sizes 64,4096,...] [--seconds S] [--window N]   (prints one JSON line per size)
 * Across two hosts or namespaces (issue 21 §1): the server side `--server --address A --port P --sizes ...`, the
 * client `--client --address A --port P --sizes ...` (the same sizes). Without either, both sides in two processes
 * on 127.0.0.1.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEY 0xC0DEu
#define MESSAGE 64

enum { DONE = 1, QUIT = 2 };

struct side {
    struct fi_info* info;
    struct fid_fabric* fabric;
    struct fid_domain* domain;
    struct fid_eq* eq;
    struct fid_ep* ep;
    struct fid_cq* cq;
    struct fid_mr* mr;
    char* buffer; /* data, then a send slot and a receive slot of MESSAGE bytes */
    size_t bytes;
};

static int receive_context; /* the op_context of receives: every other completion is a write or a send */

static void check(int result, const char* what) {
    if (result < 0) {
        fprintf(stderr, "fi_rma_write_bw: %s: %s\n", what, fi_strerror(-result));
        exit(1);
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char* g_address = "127.0.0.1";

static struct fi_info* get_info(const char* port, int server) {
    struct fi_info* hints = fi_allocinfo();
    struct fi_info* info = NULL;
    hints->ep_attr->type = FI_EP_MSG;
    hints->caps = FI_MSG | FI_RMA;
    hints->mode = 0;
    hints->domain_attr->mr_mode = 0; /* offsets from the region's start, keys chosen by us */
    hints->fabric_attr->prov_name = strdup("tcp");
    check(fi_getinfo(FI_VERSION(1, 9), g_address, port, server ? FI_SOURCE : 0, hints, &info), "fi_getinfo");
    fi_freeinfo(hints);
    return info;
}

/* Domain, endpoint, CQ and the registered buffer, for `info` (the connection request's on the server). */
static void open_endpoint(struct side* s, struct fi_info* info) {
    check(fi_domain(s->fabric, info, &s->domain, NULL), "fi_domain");
    check(fi_endpoint(s->domain, info, &s->ep, NULL), "fi_endpoint");
    struct fi_cq_attr cq_attr = {.size = 4096, .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
    check(fi_cq_open(s->domain, &cq_attr, &s->cq, NULL), "fi_cq_open");
    check(fi_ep_bind(s->ep, &s->eq->fid, 0), "fi_ep_bind eq");
    check(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind cq");
    check(fi_enable(s->ep), "fi_enable");
    s->buffer = calloc(1, s->bytes + 2 * MESSAGE);
    check(fi_mr_reg(s->domain, s->buffer, s->bytes + 2 * MESSAGE, FI_REMOTE_WRITE | FI_WRITE | FI_SEND | FI_RECV, 0,
                    KEY, 0, &s->mr, NULL),
          "fi_mr_reg");
}

static void wait_event(struct side* s, uint32_t expected, struct fi_eq_cm_entry* entry) {
    uint32_t event = 0;
    ssize_t got = fi_eq_sread(s->eq, &event, entry, sizeof(*entry), 10000, 0);
    if (got < 0 || event != expected) {
        fprintf(stderr, "fi_rma_write_bw: expected CM event %u, got %u (%zd)\n", expected, event, got);
        exit(1);
    }
}

static void post_receive(struct side* s) {
    check((int)fi_recv(s->ep, s->buffer + s->bytes + MESSAGE, MESSAGE, fi_mr_desc(s->mr), 0, &receive_context),
          "fi_recv");
}

static void send_word(struct side* s, uint32_t word) {
    memcpy(s->buffer + s->bytes, &word, sizeof(word));
    ssize_t result;
    while ((result = fi_send(s->ep, s->buffer + s->bytes, sizeof(word), fi_mr_desc(s->mr), 0, NULL)) == -FI_EAGAIN) {
        struct fi_cq_entry entry;
        (void)fi_cq_read(s->cq, &entry, 1);
    }
    check((int)result, "fi_send");
}

/* Polls once: returns how many writes or sends completed; sets *received when a message came in. */
static int poll_cq(struct side* s, uint32_t* received) {
    struct fi_cq_entry entries[32];
    ssize_t n = fi_cq_read(s->cq, entries, 32);
    if (n == -FI_EAGAIN) return 0;
    if (n < 0) {
        struct fi_cq_err_entry error;
        memset(&error, 0, sizeof(error));
        fi_cq_readerr(s->cq, &error, 0);
        fprintf(stderr, "fi_rma_write_bw: completion error %s\n", fi_strerror(error.err));
        exit(1);
    }
    int finished = 0;
    for (ssize_t i = 0; i < n; ++i) {
        if (entries[i].op_context == &receive_context) {
            memcpy(received, s->buffer + s->bytes + MESSAGE, sizeof(*received));
            post_receive(s);
        } else {
            ++finished;
        }
    }
    return finished;
}

static int serve(const char* port, size_t bytes, int ready_fd) {
    struct side s = {.bytes = bytes};
    s.info = get_info(port, 1);
    check(fi_fabric(s.info->fabric_attr, &s.fabric, NULL), "fi_fabric");
    struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
    check(fi_eq_open(s.fabric, &eq_attr, &s.eq, NULL), "fi_eq_open");
    struct fid_pep* pep;
    check(fi_passive_ep(s.fabric, s.info, &pep, NULL), "fi_passive_ep");
    check(fi_pep_bind(pep, &s.eq->fid, 0), "fi_pep_bind");
    check(fi_listen(pep), "fi_listen");
    if (ready_fd >= 0) (void)!write(ready_fd, "r", 1);
    struct fi_eq_cm_entry entry;
    wait_event(&s, FI_CONNREQ, &entry);
    open_endpoint(&s, entry.info);
    post_receive(&s);
    check(fi_accept(s.ep, NULL, 0), "fi_accept");
    wait_event(&s, FI_CONNECTED, &entry);
    for (;;) {
        uint32_t word = 0;
        while (word == 0) poll_cq(&s, &word);
        if (word == QUIT) break;
        send_word(&s, DONE); /* everything written before the Done has landed */
    }
    return 0;
}

int main(int argc, char** argv) {
    size_t sizes[32] = {64, 4096, 65536, 1048576};
    int count = 4;
    double seconds = 1.0;
    int window = 16;
    enum { BOTH, SERVER, CLIENT } role = BOTH;
    const char* chosen_port = NULL;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--server") == 0) role = SERVER;
        if (strcmp(argv[i], "--client") == 0) role = CLIENT;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--server") == 0 || strcmp(argv[i], "--client") == 0) {
            --i; /* a flag without a value */
            continue;
        }
        if (strcmp(argv[i], "--address") == 0) g_address = argv[i + 1];
        if (strcmp(argv[i], "--port") == 0) chosen_port = argv[i + 1];
        if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
        if (strcmp(argv[i], "--window") == 0) window = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--sizes") == 0) {
            count = 0;
            for (char* item = strtok(argv[i + 1], ","); item != NULL && count < 32; item = strtok(NULL, ","))
                sizes[count++] = strtoul(item, NULL, 10);
        }
    }
    size_t largest = 0;
    for (int i = 0; i < count; ++i) largest = sizes[i] > largest ? sizes[i] : largest;
    char port[16];
    srand((unsigned)getpid());
    snprintf(port, sizeof(port), "%s", chosen_port != NULL ? chosen_port : "");
    if (chosen_port == NULL) snprintf(port, sizeof(port), "%d", 20000 + rand() % 20000);
    if (role == SERVER) return serve(port, largest, -1);
    pid_t child = -1;
    if (role == BOTH) {
        int ready[2];
        if (pipe(ready) != 0) return 1;
        child = fork();
        if (child == 0) _exit(serve(port, largest, ready[1]));
        char byte;
        if (read(ready[0], &byte, 1) != 1) return 1;
    }

    struct side s = {.bytes = largest};
    s.info = get_info(port, 0);
    check(fi_fabric(s.info->fabric_attr, &s.fabric, NULL), "fi_fabric");
    struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
    check(fi_eq_open(s.fabric, &eq_attr, &s.eq, NULL), "fi_eq_open");
    open_endpoint(&s, s.info);
    post_receive(&s);
    check(fi_connect(s.ep, s.info->dest_addr, NULL, 0), "fi_connect");
    struct fi_eq_cm_entry entry;
    wait_event(&s, FI_CONNECTED, &entry);
    for (int i = 0; i < count; ++i) {
        const size_t size = sizes[i];
        long completed = 0;
        int outstanding = 0;
        uint32_t word = 0;
        const double start = now();
        while (now() - start < seconds) {
            while (outstanding < window) {
                ssize_t result = fi_write(s.ep, s.buffer, size, fi_mr_desc(s.mr), 0, 0, KEY, NULL);
                if (result == -FI_EAGAIN) break;
                check((int)result, "fi_write");
                ++outstanding;
            }
            int finished = poll_cq(&s, &word);
            outstanding -= finished;
            completed += finished;
        }
        while (outstanding > 0) {
            int finished = poll_cq(&s, &word);
            outstanding -= finished;
            completed += finished;
        }
        send_word(&s, DONE);
        int sends = 1;
        while (word != DONE || sends > 0) sends -= poll_cq(&s, &word);
        const double elapsed = now() - start;
        printf(
            "{\"test\":\"fi_rma_write_bw\",\"provider\":\"tcp\",\"size\":%zu,\"iterations\":%ld,\"gbits_per_s\":%.4f}"
            "\n",
            size, completed, (double)size * (double)completed * 8 / elapsed / 1e9);
        fflush(stdout);
    }
    send_word(&s, QUIT);
    if (child < 0) { /* the server is another process: let the Quit go out */
        for (int waited = 0; waited < 50; ++waited) {
            struct fi_cq_entry drained;
            (void)fi_cq_read(s.cq, &drained, 1);
            usleep(10000);
        }
        return 0;
    }
    int status = 0;
    for (int waited = 0; waited < 500 && waitpid(child, &status, WNOHANG) == 0; ++waited) {
        struct fi_cq_entry drained;
        (void)fi_cq_read(s.cq, &drained, 1);
        usleep(10000);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}
