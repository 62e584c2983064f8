/* Status names and what to do about them, for the tools' messages (issue 20: "NdkConnect failed: 0xC0000236"
 * said nothing). Names come from SoftNdkStatusName; remedies for the statuses a user can act on. */
#ifndef SOFTNDK_TOOLS_NDK_STATUS_H
#define SOFTNDK_TOOLS_NDK_STATUS_H

#include <softndk/softndk.h>

#include <stdio.h>

typedef struct {
    NTSTATUS status;
    const char* remedy; /* what a user can do, or what it means */
} ndk_status_text_t;

static inline const ndk_status_text_t* ndk_status_text(NTSTATUS status) {
    static const ndk_status_text_t texts[] = {
        {STATUS_CONNECTION_REFUSED,
         "nobody listens at that address and port, or what listens there closed the connection without an MPA "
         "reply (not an iWARP peer, or its listener closed): start the server first, or check -a and -p"},
        {STATUS_HOST_UNREACHABLE,
         "no route to that host, or it did not answer: check the address (ip route get ADDRESS)"},
        {STATUS_NETWORK_UNREACHABLE, "no route to that network: check the address"},
        {STATUS_SHARING_VIOLATION, "that port is in use (another listener, or a process): pick another -p"},
        {STATUS_ADDRESS_ALREADY_EXISTS, "that address and port are taken already"},
        {STATUS_INVALID_ADDRESS,
         "that address is not one of this host's (or of the interface SOFTNDK_INTERFACE names): check -a, or unset "
         "SOFTNDK_INTERFACE"},
        {STATUS_IO_TIMEOUT, "the peer did not answer in time"},
        {STATUS_CONNECTION_RESET, "the peer reset the connection"},
        {STATUS_CONNECTION_ABORTED, "the connection was aborted"},
        {STATUS_CONNECTION_DISCONNECTED, "the peer disconnected"},
        {STATUS_CONNECTION_INVALID, "the connection is not (or no longer) up"},
        {STATUS_CANCELLED, "the request was flushed: the connection ended"},
        {STATUS_INSUFFICIENT_RESOURCES, "out of a resource (a queue is full, or locked memory: raise `ulimit -l`)"},
        {STATUS_INVALID_PARAMETER, "a parameter was refused (the text says which)"},
        {STATUS_NOT_SUPPORTED, "softndk does not support this"},
        {STATUS_ACCESS_DENIED, "not allowed"},
        {STATUS_INVALID_HANDLE, "an unknown or stale token or object"},
        {STATUS_REQUEST_ABORTED, "the request was aborted"},
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); ++i)
        if (texts[i].status == status) return &texts[i];
    return NULL;
}

/* "STATUS_X (0x...)", then ": remedy" where one is known; the name from SoftNdkStatusName (issue 20 §1). */
static inline const char* ndk_status_describe(NTSTATUS status, char* buffer, size_t length) {
    const char* name = SoftNdkStatusName(status);
    const ndk_status_text_t* text = ndk_status_text(status);
    snprintf(buffer, length, "%s (0x%08X)%s%s", name ? name : "NTSTATUS", (unsigned)status, text ? ": " : "",
             text ? text->remedy : "");
    return buffer;
}

#endif
