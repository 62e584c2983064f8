/* softndk kernel layer — ndis.h, the NDK-relevant part (issue 9 §2): ntddk.h, the NDKPI (with the NDIS-side
 * NDK structures of softndk/ndkpi.h), interface types, NDIS status codes and the NDIS memory helpers. There is
 * no miniport or protocol model: NdisMRegisterMiniportDriver and friends are not provided. */
#ifndef SOFTNDK_KM_NDIS_H
#define SOFTNDK_KM_NDIS_H

#include <softndk/km/ntddk.h>
#include <softndk/km/netioapi.h>
#include <softndk/ndkpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NDIS_STATUS_FAILURE ((NDIS_STATUS)STATUS_UNSUCCESSFUL)
#define NDIS_STATUS_NOT_SUPPORTED ((NDIS_STATUS)STATUS_NOT_SUPPORTED)
#define NDIS_STATUS_INVALID_PARAMETER ((NDIS_STATUS)STATUS_INVALID_PARAMETER)
#define NDIS_STATUS_BUFFER_TOO_SHORT ((NDIS_STATUS)0xC0010016L)
#define NDIS_STATUS_INVALID_LENGTH ((NDIS_STATUS)0xC0010014L)
#define NDIS_STATUS_REQUEST_ABORTED ((NDIS_STATUS)STATUS_REQUEST_ABORTED)
#define NDIS_OBJECT_TYPE_DEFAULT 0x80
typedef NDIS_STATUS* PNDIS_STATUS;
typedef struct _NDIS_OBJECT_HEADER* PNDIS_OBJECT_HEADER;

#define NdisZeroMemory(d, n) RtlZeroMemory((d), (n))
#define NdisMoveMemory(d, s, n) RtlCopyMemory((d), (s), (n))
#define NdisEqualMemory(a, b, n) RtlEqualMemory((a), (b), (n))
#define NdisFillMemory(d, n, f) RtlFillMemory((d), (n), (f))
#define NdisInterlockedIncrement(a) InterlockedIncrement(a)
#define NdisInterlockedDecrement(a) InterlockedDecrement(a)
/* NdisHandle is ignored (there is no NDIS handle); the memory comes from the tagged non-paged pool. */
static inline PVOID NdisAllocateMemoryWithTagPriority(NDIS_HANDLE NdisHandle, UINT Length, ULONG Tag,
                                                      EX_POOL_PRIORITY Priority) {
    (void)NdisHandle;
    return ExAllocatePoolWithTagPriority(NonPagedPoolNx, Length, Tag, Priority);
}
static inline VOID NdisFreeMemoryWithTagPriority(NDIS_HANDLE NdisHandle, PVOID VirtualAddress, ULONG Tag) {
    (void)NdisHandle;
    ExFreePoolWithTag(VirtualAddress, Tag);
}
static inline VOID NdisFreeMemory(PVOID VirtualAddress, UINT Length, UINT MemoryFlags) {
    (void)Length;
    (void)MemoryFlags;
    ExFreePool(VirtualAddress);
}

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_NDIS_H */
