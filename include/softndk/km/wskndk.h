/* softndk kernel layer — wskndk.h: the WSK NDK extension (issue 9 §2). WskControlClient with
 * WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH fills a WSK_PROVIDER_NDK_DISPATCH; WskOpenNdkAdapter opens the softndk
 * adapter of an interface index with that interface's configuration (softndk_km.h); WskCloseNdkAdapter closes
 * it (blocking, PASSIVE_LEVEL, LIFE-15). NDK 1.0 … 1.2 open an adapter that reports 1.2, NDK 2.0 … 2.1 one that
 * reports 2.1 (AI-08, spec decision "NDK 2.x"); any other version answers NDIS_STATUS_BAD_VERSION. */
#ifndef SOFTNDK_KM_WSKNDK_H
#define SOFTNDK_KM_WSKNDK_H

#include <softndk/km/wsk.h>
#include <softndk/ndkpi.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef NTSTATUS(WSKAPI* PFN_WSK_NDK_OPEN_ADAPTER)(PWSK_CLIENT Client, NDK_VERSION NdkVersion, NET_IFINDEX IfIndex,
                                                   NDK_ADAPTER** ppNdkAdapter);
typedef VOID(WSKAPI* PFN_WSK_NDK_CLOSE_ADAPTER)(PWSK_CLIENT Client, NDK_ADAPTER* pNdkAdapter);
typedef struct _WSK_PROVIDER_NDK_DISPATCH {
    PFN_WSK_NDK_OPEN_ADAPTER WskOpenNdkAdapter;
    PFN_WSK_NDK_CLOSE_ADAPTER WskCloseNdkAdapter;
} WSK_PROVIDER_NDK_DISPATCH, *PWSK_PROVIDER_NDK_DISPATCH;
/* 'NDKD' as a multi-character constant (MSVC and GCC agree on its value). */
#define WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH ((ULONG)0x4E444B44)

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_WSKNDK_H */
