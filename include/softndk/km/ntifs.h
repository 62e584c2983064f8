/* softndk kernel layer — ntifs.h: a superset of ntddk.h in the WDK; here only ntddk.h (no file systems). */
#ifndef SOFTNDK_KM_NTIFS_H
#define SOFTNDK_KM_NTIFS_H
#include <softndk/km/ntddk.h>
#endif /* SOFTNDK_KM_NTIFS_H */
