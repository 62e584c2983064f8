/* softndk kernel layer — in6addr.h: forwards to the NDK layer (softndk/ndkpi.h holds ndkpi.h, ndkinfo.h,
 * the ws2def.h address types and the NTSTATUS codes), so `#include <in6addr.h>` works unchanged. */
#ifndef SOFTNDK_KM_IN6ADDR_H
#define SOFTNDK_KM_IN6ADDR_H
#include <softndk/ndkpi.h>
#endif
