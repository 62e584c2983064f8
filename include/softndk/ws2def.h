/* softndk — Winsock address types with their ws2def.h / in6addr.h names and layouts (issue 9 §1).
 * Included by softndk/ndkpi.h after the base types. Every struct is byte-identical to the Linux struct the
 * provider hands to the kernel's sockets (static asserts at the end), so a SOCKADDR_IN built by Windows code
 * can be passed wherever softndk takes a PSOCKADDR, and a Linux sockaddr_in can be read as a SOCKADDR_IN.
 *
 * Address families: the names are the Linux values (AF_INET 2, AF_INET6 10). Windows spells AF_INET6 as 23;
 * source code that uses the macro is unaffected, and the provider refuses a literal 23 (docs/spec-decisions.md,
 * "AF_INET6"). SOFTNDK_WINDOWS_AF_INET6 names the Windows value for code that translates foreign bytes. */
#ifndef SOFTNDK_WS2DEF_H
#define SOFTNDK_WS2DEF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SOFTNDK_WINDOWS_AF_INET6 23

typedef unsigned short ADDRESS_FAMILY;

/* ws2def.h SOCKADDR is the Linux struct sockaddr: { family; char sa_data[14]; } on both systems. */
typedef struct sockaddr SOCKADDR;
typedef struct sockaddr* PSOCKADDR;
typedef struct sockaddr* LPSOCKADDR;

/* IN_ADDR: the Winsock union S_un. The Linux spelling s_addr is a member of the same union, so both
 * `a.S_un.S_addr` and `a.s_addr` compile (Windows gets the latter from a macro). */
typedef struct _SOFTNDK_IN_ADDR {
    union {
        union {
            struct {
                UCHAR s_b1, s_b2, s_b3, s_b4;
            } S_un_b;
            struct {
                USHORT s_w1, s_w2;
            } S_un_w;
            ULONG S_addr;
        } S_un;
        in_addr_t s_addr;
    };
} IN_ADDR, *PIN_ADDR, *LPIN_ADDR;

/* IN6_ADDR: the Winsock union u { Byte[16]; Word[8]; }. glibc's s6_addr macro expands to __in6_u.__u6_addr8,
 * so the glibc member names are kept as a second view of the same 16 bytes and s6_addr works too. */
typedef struct _SOFTNDK_IN6_ADDR {
    union {
        union {
            UCHAR Byte[16];
            USHORT Word[8];
        } u;
        union {
            uint8_t __u6_addr8[16];
            uint16_t __u6_addr16[8];
            uint32_t __u6_addr32[4];
        } __in6_u;
    };
} IN6_ADDR, *PIN6_ADDR, *LPIN6_ADDR;

typedef struct _SOFTNDK_SOCKADDR_IN {
    ADDRESS_FAMILY sin_family;
    USHORT sin_port; /* network byte order */
    IN_ADDR sin_addr;
    CHAR sin_zero[8];
} SOCKADDR_IN, *PSOCKADDR_IN;

typedef union _SCOPE_ID {
    struct {
        ULONG Zone : 28;
        ULONG Level : 4;
    };
    ULONG Value;
} SCOPE_ID, *PSCOPE_ID;

typedef struct _SOFTNDK_SOCKADDR_IN6 {
    ADDRESS_FAMILY sin6_family;
    USHORT sin6_port; /* network byte order */
    ULONG sin6_flowinfo;
    IN6_ADDR sin6_addr;
    union {
        ULONG sin6_scope_id;
        SCOPE_ID sin6_scope_struct;
    };
} SOCKADDR_IN6, *PSOCKADDR_IN6, SOCKADDR_IN6_LH, *PSOCKADDR_IN6_LH;

typedef struct _SOFTNDK_SOCKADDR_STORAGE {
    ADDRESS_FAMILY ss_family;
    CHAR __ss_pad1[6];
    LONGLONG __ss_align;
    CHAR __ss_pad2[112];
} SOCKADDR_STORAGE, *PSOCKADDR_STORAGE, SOCKADDR_STORAGE_LH, *PSOCKADDR_STORAGE_LH;

typedef union _SOCKADDR_INET {
    SOCKADDR_IN Ipv4;
    SOCKADDR_IN6 Ipv6;
    ADDRESS_FAMILY si_family;
} SOCKADDR_INET, *PSOCKADDR_INET;

/* Byte-identical to the Linux structs (issue 9 §1). */
#ifdef __cplusplus
#define SOFTNDK_WS2_ASSERT(cond, what) static_assert(cond, what)
#define SOFTNDK_WS2_ALIGNOF(type) alignof(type)
#else
#define SOFTNDK_WS2_ASSERT(cond, what) _Static_assert(cond, what)
#define SOFTNDK_WS2_ALIGNOF(type) _Alignof(type)
#endif
SOFTNDK_WS2_ASSERT(sizeof(IN_ADDR) == sizeof(struct in_addr) && sizeof(IN_ADDR) == 4, "IN_ADDR");
SOFTNDK_WS2_ASSERT(sizeof(IN6_ADDR) == sizeof(struct in6_addr) && sizeof(IN6_ADDR) == 16, "IN6_ADDR");
SOFTNDK_WS2_ASSERT(sizeof(SOCKADDR_IN) == sizeof(struct sockaddr_in) && sizeof(SOCKADDR_IN) == 16, "SOCKADDR_IN");
SOFTNDK_WS2_ASSERT(offsetof(SOCKADDR_IN, sin_family) == offsetof(struct sockaddr_in, sin_family) &&
                       offsetof(SOCKADDR_IN, sin_port) == offsetof(struct sockaddr_in, sin_port) &&
                       offsetof(SOCKADDR_IN, sin_addr) == offsetof(struct sockaddr_in, sin_addr) &&
                       offsetof(SOCKADDR_IN, sin_zero) == offsetof(struct sockaddr_in, sin_zero),
                   "SOCKADDR_IN members");
SOFTNDK_WS2_ASSERT(sizeof(SOCKADDR_IN6) == sizeof(struct sockaddr_in6) && sizeof(SOCKADDR_IN6) == 28, "SOCKADDR_IN6");
SOFTNDK_WS2_ASSERT(offsetof(SOCKADDR_IN6, sin6_family) == offsetof(struct sockaddr_in6, sin6_family) &&
                       offsetof(SOCKADDR_IN6, sin6_port) == offsetof(struct sockaddr_in6, sin6_port) &&
                       offsetof(SOCKADDR_IN6, sin6_flowinfo) == offsetof(struct sockaddr_in6, sin6_flowinfo) &&
                       offsetof(SOCKADDR_IN6, sin6_addr) == offsetof(struct sockaddr_in6, sin6_addr) &&
                       offsetof(SOCKADDR_IN6, sin6_scope_id) == offsetof(struct sockaddr_in6, sin6_scope_id),
                   "SOCKADDR_IN6 members");
SOFTNDK_WS2_ASSERT(sizeof(SOCKADDR_STORAGE) == sizeof(struct sockaddr_storage) &&
                       offsetof(SOCKADDR_STORAGE, ss_family) == offsetof(struct sockaddr_storage, ss_family) &&
                       SOFTNDK_WS2_ALIGNOF(SOCKADDR_STORAGE) == SOFTNDK_WS2_ALIGNOF(struct sockaddr_storage),
                   "SOCKADDR_STORAGE");
SOFTNDK_WS2_ASSERT(sizeof(SOCKADDR_INET) == 28 && offsetof(SOCKADDR_INET, si_family) == 0, "SOCKADDR_INET");
SOFTNDK_WS2_ASSERT(sizeof(ADDRESS_FAMILY) == sizeof(sa_family_t), "ADDRESS_FAMILY");
#undef SOFTNDK_WS2_ASSERT
#undef SOFTNDK_WS2_ALIGNOF

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_WS2DEF_H */
