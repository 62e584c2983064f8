/* softndk kernel layer — ntstatus.h: forwards to the NDK layer (softndk/ndkpi.h holds ndkpi.h, ndkinfo.h,
 * the ws2def.h address types and the NTSTATUS codes), so `#include <ntstatus.h>` works unchanged. */
#ifndef SOFTNDK_KM_NTSTATUS_H
#define SOFTNDK_KM_NTSTATUS_H
#include <softndk/ndkpi.h>
#endif
