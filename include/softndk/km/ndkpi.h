/* softndk kernel layer — ndkpi.h: forwards to the NDK layer (softndk/ndkpi.h holds ndkpi.h, ndkinfo.h,
 * the ws2def.h address types and the NTSTATUS codes), so `#include <ndkpi.h>` works unchanged. */
#ifndef SOFTNDK_KM_NDKPI_H
#define SOFTNDK_KM_NDKPI_H
#include <softndk/ndkpi.h>
#endif
