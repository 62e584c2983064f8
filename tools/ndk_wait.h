/* Tiny helpers shared by the C tools: wait for an NDK completion whether the call pended or not. */
#ifndef SOFTNDK_TOOLS_NDK_WAIT_H
#define SOFTNDK_TOOLS_NDK_WAIT_H

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <softndk/softndk.h>

#include "ndk_status.h"

typedef struct {
    atomic_int done;
    NTSTATUS status;
    NDK_OBJECT_HEADER* object;
} ndk_wait_t;

static inline void ndk_wait_on_request(PVOID context, NTSTATUS status) {
    ndk_wait_t* wait = (ndk_wait_t*)context;
    wait->status = status;
    atomic_store(&wait->done, 1);
}
static inline void ndk_wait_on_create(PVOID context, NTSTATUS status, NDK_OBJECT_HEADER* object) {
    ndk_wait_t* wait = (ndk_wait_t*)context;
    wait->object = object;
    ndk_wait_on_request(context, status);
}
static inline void ndk_wait_on_close(PVOID context) {
    ndk_wait_on_request(context, STATUS_SUCCESS);
}

static inline double ndk_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e9 + (double)now.tv_nsec;
}

/* The final status of a call that returned `returned`. */
static inline NTSTATUS ndk_wait(ndk_wait_t* wait, NTSTATUS returned) {
    if (returned != STATUS_PENDING) return returned;
    while (!atomic_load(&wait->done)) sched_yield();
    return wait->status;
}

/* The same for a wait on a peer: after NDK_WAIT_SAY_SECONDS it prints `waiting_for` once, so a long wait says
 * what it waits for (the request itself ends at the adapter's timeout). */
#define NDK_WAIT_SAY_SECONDS 3
static inline NTSTATUS ndk_wait_saying(ndk_wait_t* wait, NTSTATUS returned, const char* waiting_for) {
    if (returned != STATUS_PENDING) return returned;
    const double say_at = ndk_now_ns() + NDK_WAIT_SAY_SECONDS * 1e9;
    int said = 0;
    while (!atomic_load(&wait->done)) {
        if (!said && ndk_now_ns() > say_at) {
            fprintf(stderr, "%s (%d s so far)\n", waiting_for, NDK_WAIT_SAY_SECONDS);
            said = 1;
        }
        sched_yield();
    }
    return wait->status;
}

static inline void ndk_check(NTSTATUS status, const char* what) {
    if (!NT_SUCCESS(status)) {
        char described[256];
        const char* detail = SoftNdkGetLastErrorText();
        fprintf(stderr, "%s failed: %s%s%s\n", what, ndk_status_describe(status, described, sizeof(described)),
                detail[0] ? "; " : "", detail);
        exit(1);
    }
}

/* The created object: stored through `slot` when the call completed inline, else given to the completion. */
static inline void* ndk_created(ndk_wait_t* wait, NTSTATUS returned, void* slot, const char* what) {
    ndk_check(ndk_wait(wait, returned), what);
    void* inline_object = *(void**)slot;
    return inline_object != NULL ? inline_object : (void*)wait->object;
}

/* --pend or --random (default inline); both at once is refused (exit 2) rather than the last one winning. */
static inline ULONG ndk_parse_mode(int argc, char** argv) {
    ULONG mode = SOFTNDK_COMPLETION_INLINE;
    for (int i = 1; i < argc; ++i) {
        ULONG asked = strcmp(argv[i], "--pend") == 0     ? SOFTNDK_COMPLETION_PEND
                      : strcmp(argv[i], "--random") == 0 ? SOFTNDK_COMPLETION_RANDOM
                                                         : SOFTNDK_COMPLETION_INLINE;
        if (asked == SOFTNDK_COMPLETION_INLINE) continue;
        if (mode != SOFTNDK_COMPLETION_INLINE && mode != asked) {
            const char* tool = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
            fprintf(stderr, "%s: --pend and --random exclude each other; give one (see %s --help)\n", tool, tool);
            exit(2);
        }
        mode = asked;
    }
    return mode;
}

#endif
