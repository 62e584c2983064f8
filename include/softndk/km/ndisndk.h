/* softndk kernel layer — ndisndk.h: the NDIS NDK provider structures live in softndk/ndkpi.h. */
#ifndef SOFTNDK_KM_NDISNDK_H
#define SOFTNDK_KM_NDISNDK_H
#include <softndk/km/ndis.h>
#endif
