/* softndk kernel layer — ndkinfo.h: forwards to the NDK layer (softndk/ndkpi.h holds ndkpi.h, ndkinfo.h,
 * the ws2def.h address types and the NTSTATUS codes), so `#include <ndkinfo.h>` works unchanged. */
#ifndef SOFTNDK_KM_NDKINFO_H
#define SOFTNDK_KM_NDKINFO_H
#include <softndk/ndkpi.h>
#endif
