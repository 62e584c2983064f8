/* The kernel layer's headers compile as strict C11 together, the way a WDK driver includes them, and the
 * Winsock address types have the Windows member names and the Linux layout (issue 9 §1). */
#include <ntddk.h>
#include <wdm.h>
#include <ntdef.h>
#include <ndis.h>
#include <ndkpi.h>
#include <wsk.h>
#include <wskndk.h>
#include <ntstrsafe.h>
#include <netioapi.h>
#include <ip2string.h>

_Static_assert(sizeof(SOCKADDR_IN) == sizeof(struct sockaddr_in), "SOCKADDR_IN layout");
_Static_assert(sizeof(SOCKADDR_IN6) == sizeof(struct sockaddr_in6), "SOCKADDR_IN6 layout");
_Static_assert(sizeof(SOCKADDR_STORAGE) == sizeof(struct sockaddr_storage), "SOCKADDR_STORAGE layout");
_Static_assert(sizeof(PNDK_QP) == sizeof(void*) && sizeof(PNDK_SGE) == sizeof(void*), "PNDK_* typedefs");
_Static_assert(sizeof(enum _NDK_RDMA_TECHNOLOGY) == 4, "enum tag");
_Static_assert(NT_ERROR(STATUS_INVALID_PARAMETER) && NT_WARNING(STATUS_BUFFER_OVERFLOW), "severity macros");
_Static_assert(WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH == 'NDKD', "the 'NDKD' control code");
/* AI-08 / spec decision "NDK 2.x": the layouts Windows' own type records give on x64 (Windows 10 1607 …
 * Windows 11), the same for 1.x and 2.x consumers: NDK_ADAPTER_INFO is 104 bytes, the 2.1 connector slots
 * follow NdkDisconnect, NDK_RESULT_EX.ProviderErrorCode sits in the padding after Type. */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(NDK_ADAPTER_INFO) == 104 && offsetof(NDK_ADAPTER_INFO, MaxRegistrationSize) == 0x10 &&
                   offsetof(NDK_ADAPTER_INFO, AdapterFlags) == 0x5C &&
                   offsetof(NDK_ADAPTER_INFO, RdmaTechnology) == 0x60,
               "NDK_ADAPTER_INFO as Windows lays it out on x64");
_Static_assert(sizeof(NDK_ADAPTER_DISPATCH) == 0x48, "nine adapter slots, no NdkQueryAdapterInfoEx");
_Static_assert(offsetof(NDK_CONNECTOR_DISPATCH, NdkCompleteConnectEx) == 0x58 &&
                   offsetof(NDK_CONNECTOR_DISPATCH, NdkAcceptEx) == 0x60 && sizeof(NDK_CONNECTOR_DISPATCH) == 0x68,
               "the NDKPI 2.1 connector slots");
_Static_assert(offsetof(NDK_RESULT_EX, ProviderErrorCode) == 0x1C &&
                   offsetof(NDK_RESULT_EX, TypeSpecificCompletionOutput) == 0x20 && sizeof(NDK_RESULT_EX) == 0x28,
               "NDK_RESULT_EX, 2.1 layout");
#endif
_Static_assert(NDK_VERSION_2_MAJOR == 2 && NDK_VERSION_2_0_MINOR == 0 && NDK_VERSION_2_1_MINOR == 1, "NDKPI 2.x");

static CONST ULONG kTag = 'pFkN';

int main(void) {
    SOCKADDR_IN v4;
    RtlZeroMemory(&v4, sizeof(v4));
    v4.sin_family = AF_INET;
    v4.sin_port = RtlUshortByteSwap(445);
    v4.sin_addr.S_un.S_addr = RtlUlongByteSwap(0x7F000001);
    struct sockaddr_in* linux_v4 = (struct sockaddr_in*)&v4;
    if (linux_v4->sin_addr.s_addr != v4.sin_addr.s_addr || ntohs(linux_v4->sin_port) != 445) return 1;
    SOCKADDR_IN6 v6;
    RtlZeroMemory(&v6, sizeof(v6));
    v6.sin6_addr.u.Byte[15] = 1;
    if (!IN6_IS_ADDR_LOOPBACK((struct in6_addr*)&v6.sin6_addr) || v6.sin6_addr.s6_addr[15] != 1) return 2;
    SOCKADDR_INET any;
    any.Ipv4 = v4;
    if (any.si_family != AF_INET) return 3;
    PVOID p = ExAllocatePoolWithTag(NonPagedPoolNx, 64, kTag);
    if (p == NULL) return 4;
    ExFreePoolWithTag(p, kTag);
    IN_ADDR parsed;
    PCSTR end = NULL;
    if (!NT_SUCCESS(RtlIpv4StringToAddressA("127.0.0.1", TRUE, &end, &parsed)) ||
        parsed.S_un.S_addr != v4.sin_addr.S_un.S_addr)
        return 6;
    UNICODE_STRING name;
    RtlInitUnicodeString(&name, L"\\Registry\\Machine\\System\\CurrentControlSet\\Services\\none");
    OBJECT_ATTRIBUTES attributes;
    InitializeObjectAttributes(&attributes, &name, OBJ_CASE_INSENSITIVE | OBJ_KERNEL_HANDLE, NULL, NULL);
    HANDLE key = NULL;
    if (ZwOpenKey(&key, KEY_READ, &attributes) != STATUS_OBJECT_NAME_NOT_FOUND) return 7;
    return KeGetCurrentIrql() == PASSIVE_LEVEL ? 0 : 5;
}
