/* softndk kernel layer — ntddk.h: the WDK's ntddk.h includes wdm.h; so does this one (issue 9 §2). */
#ifndef SOFTNDK_KM_NTDDK_H
#define SOFTNDK_KM_NTDDK_H
#include <softndk/km/wdm.h>
#endif /* SOFTNDK_KM_NTDDK_H */
