/* The source address for a connection to `destination`: the one the host's routing table picks (a UDP socket
 * connected there), port 0. The adapter owns it when it is loopback, or when the adapter is bound to that
 * interface (SOFTNDK_INTERFACE). Shared by the C and C++ tools. Returns 0 when there is no route. */
#ifndef SOFTNDK_TOOLS_NDK_ROUTE_H
#define SOFTNDK_TOOLS_NDK_ROUTE_H

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <softndk/softndk.h>

static inline int ndk_source_for(const SOCKADDR_INET* destination, SOCKADDR_INET* source) {
    socklen_t length = destination->si_family == AF_INET ? sizeof(SOCKADDR_IN) : sizeof(SOCKADDR_IN6);
    int fd = socket(destination->si_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    memset(source, 0, sizeof(*source));
    if (fd < 0) return 0;
    int ok = connect(fd, (const struct sockaddr*)destination, length) == 0 &&
             getsockname(fd, (struct sockaddr*)source, &length) == 0;
    close(fd);
    if (source->si_family == AF_INET)
        source->Ipv4.sin_port = 0;
    else
        source->Ipv6.sin6_port = 0;
    return ok;
}

/* An IPv4 or IPv6 address, or a host name resolved as rping resolves -a (getaddrinfo, the first IPv4 or IPv6
 * answer; `family` AF_INET keeps IPv4 only), with `port`. Returns the SOCKADDR's length, or 0 with a line in
 * `error` that says why (issue 20 §1: "Hostnames resolve, as rping's do"). */
static inline int ndk_resolve(const char* text, unsigned port, int family, SOCKADDR_INET* address, char* error,
                              size_t error_length) {
    struct addrinfo hints, *answers = NULL;
    memset(&hints, 0, sizeof(hints));
    memset(address, 0, sizeof(*address));
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    struct in6_addr ipv6;
    if (family == AF_INET && inet_pton(AF_INET6, text, &ipv6) == 1) {
        snprintf(error, error_length, "\"%s\" is an IPv6 address; an IPv4 address or host name is needed", text);
        return 0;
    }
    const int failed = getaddrinfo(text, NULL, &hints, &answers);
    if (failed != 0) {
        snprintf(error, error_length, "\"%s\" is not an address, and resolving it as a host name failed: %s", text,
                 gai_strerror(failed));
        return 0;
    }
    int length = 0;
    for (struct addrinfo* answer = answers; answer != NULL && length == 0; answer = answer->ai_next) {
        if (answer->ai_family == AF_INET) {
            memcpy(&address->Ipv4, answer->ai_addr, sizeof(SOCKADDR_IN));
            address->Ipv4.sin_port = htons((uint16_t)port);
            length = (int)sizeof(SOCKADDR_IN);
        } else if (answer->ai_family == AF_INET6) {
            memcpy(&address->Ipv6, answer->ai_addr, sizeof(SOCKADDR_IN6));
            address->Ipv6.sin6_port = htons((uint16_t)port);
            length = (int)sizeof(SOCKADDR_IN6);
        }
    }
    freeaddrinfo(answers);
    if (length == 0) snprintf(error, error_length, "\"%s\" has no IPv4 or IPv6 address", text);
    return length;
}

/* "waiting for ADDRESS to answer the connection request ..." into `text`, for a wait that says what it waits for. */
static inline const char* ndk_connect_wait_text(const char* tool, const SOCKADDR_INET* peer, char* text, size_t size) {
    char address[INET6_ADDRSTRLEN] = "?";
    const int v4 = peer->si_family == AF_INET;
    inet_ntop(peer->si_family, v4 ? (const void*)&peer->Ipv4.sin_addr : (const void*)&peer->Ipv6.sin6_addr, address,
              sizeof(address));
    snprintf(text, size,
             "%s: waiting for %s port %u to answer the connection request (NdkConnect ends with STATUS_IO_TIMEOUT "
             "after AcceptTimeoutMs, 30 s unless SOFTNDK_ACCEPT_TIMEOUT_MS says otherwise)",
             tool, address, (unsigned)ntohs(v4 ? peer->Ipv4.sin_port : peer->Ipv6.sin6_port));
    return text;
}

#endif
