/* Status names and what to do about them, for the tools' messages (issue 20: "NdkConnect failed: 0xC0000236"
 * said nothing). Only the statuses softndk returns (include/softndk/ntstatus.h); others print as a number. */
#ifndef SOFTNDK_TOOLS_NDK_STATUS_H
#define SOFTNDK_TOOLS_NDK_STATUS_H

#include <softndk/softndk.h>

typedef struct {
    NTSTATUS status;
    const char* name;
    const char* remedy; /* what a user can do, or what it means */
} ndk_status_text_t;

static inline const ndk_status_text_t* ndk_status_text(NTSTATUS status) {
    static const ndk_status_text_t texts[] = {
        {STATUS_CONNECTION_REFUSED, "STATUS_CONNECTION_REFUSED",
         "nobody listens at that address and port: start the server first, or check -a and -p"},
        {STATUS_HOST_UNREACHABLE, "STATUS_HOST_UNREACHABLE",
         "no route to that host: check the address; for another host set SOFTNDK_INTERFACE to the interface "
         "that reaches it"},
        {STATUS_NETWORK_UNREACHABLE, "STATUS_NETWORK_UNREACHABLE", "no route to that network: check the address"},
        {STATUS_SHARING_VIOLATION, "STATUS_SHARING_VIOLATION",
         "that port is in use (another listener, or a process): pick another -p"},
        {STATUS_ADDRESS_ALREADY_EXISTS, "STATUS_ADDRESS_ALREADY_EXISTS", "that address and port are taken already"},
        {STATUS_INVALID_ADDRESS, "STATUS_INVALID_ADDRESS",
         "the address is not one of this adapter's: check -a, or SOFTNDK_INTERFACE"},
        {STATUS_IO_TIMEOUT, "STATUS_IO_TIMEOUT", "the peer did not answer in time"},
        {STATUS_CONNECTION_RESET, "STATUS_CONNECTION_RESET", "the peer reset the connection"},
        {STATUS_CONNECTION_ABORTED, "STATUS_CONNECTION_ABORTED", "the connection was aborted"},
        {STATUS_CONNECTION_DISCONNECTED, "STATUS_CONNECTION_DISCONNECTED", "the peer disconnected"},
        {STATUS_CONNECTION_INVALID, "STATUS_CONNECTION_INVALID", "the connection is not (or no longer) up"},
        {STATUS_CANCELLED, "STATUS_CANCELLED", "the request was flushed: the connection ended"},
        {STATUS_INSUFFICIENT_RESOURCES, "STATUS_INSUFFICIENT_RESOURCES",
         "out of a resource (a queue is full, or locked memory: raise `ulimit -l`)"},
        {STATUS_INVALID_PARAMETER, "STATUS_INVALID_PARAMETER", "a parameter was refused (the text says which)"},
        {STATUS_NOT_SUPPORTED, "STATUS_NOT_SUPPORTED", "softndk does not support this"},
        {STATUS_ACCESS_DENIED, "STATUS_ACCESS_DENIED", "not allowed"},
        {STATUS_INVALID_HANDLE, "STATUS_INVALID_HANDLE", "an unknown or stale token or object"},
        {STATUS_REQUEST_ABORTED, "STATUS_REQUEST_ABORTED", "the request was aborted"},
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); ++i)
        if (texts[i].status == status) return &texts[i];
    return NULL;
}

#endif
