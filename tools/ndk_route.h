/* The source address for a connection to `destination`: the one the host's routing table picks (a UDP socket
 * connected there), port 0. The adapter owns it when it is loopback, or when the adapter is bound to that
 * interface (SOFTNDK_INTERFACE). Shared by the C and C++ tools. Returns 0 when there is no route. */
#ifndef SOFTNDK_TOOLS_NDK_ROUTE_H
#define SOFTNDK_TOOLS_NDK_ROUTE_H

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

#endif
