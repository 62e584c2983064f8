/* softndk kernel layer — ws2ipdef.h: forwards to the NDK layer (softndk/ndkpi.h holds ndkpi.h, ndkinfo.h,
 * the ws2def.h address types and the NTSTATUS codes), so `#include <ws2ipdef.h>` works unchanged. */
#ifndef SOFTNDK_KM_WS2IPDEF_H
#define SOFTNDK_KM_WS2IPDEF_H
#include <softndk/ndkpi.h>
#endif
