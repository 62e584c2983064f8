/* softndk kernel layer — wdmsec.h: IoCreateDeviceSecure and the SDDL strings for device objects (issue 19 §1).
 * The strings are the WDK's (defined in libsoftndk_km, as wdmsec.lib defines them). IoCreateDeviceSecure checks
 * the SDDL string's form ("D:P" and ACEs of six fields) and creates the device as IoCreateDevice does; the
 * security descriptor is not enforced: there is no user-mode opener (no object manager, no CreateFile path). */
#ifndef SOFTNDK_KM_WDMSEC_H
#define SOFTNDK_KM_WDMSEC_H

#include <softndk/km/wdm.h>

#ifdef __cplusplus
extern "C" {
#endif

SOFTNDK_KM_API extern const UNICODE_STRING SDDL_DEVOBJ_KERNEL_ONLY; /* L"D:P" */
#define SDDL_DEVOBJ_INF_SUPPLIED SDDL_DEVOBJ_KERNEL_ONLY
SOFTNDK_KM_API extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL;
SOFTNDK_KM_API extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_ALL;
SOFTNDK_KM_API extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_RX;
SOFTNDK_KM_API extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_R;
SOFTNDK_KM_API extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_R_RES_R;
SOFTNDK_KM_API extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RW_RES_R;
SOFTNDK_KM_API extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RWX_RES_RWX;
SOFTNDK_KM_API extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_ALL_WORLD_ALL_RES_ALL;

/* As IoCreateDevice, plus: STATUS_INVALID_PARAMETER when DefaultSDDLString is NULL or not of the form
 * "D:P(type;flags;rights;;;sid)…" with type A or D and non-empty rights and SID. DeviceClassGuid may be NULL;
 * it would name the class key whose registry settings override the SDDL, and there is no such key here. */
SOFTNDK_KM_API NTSTATUS IoCreateDeviceSecure(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize,
                                             PUNICODE_STRING DeviceName, DEVICE_TYPE DeviceType,
                                             ULONG DeviceCharacteristics, BOOLEAN Exclusive,
                                             PCUNICODE_STRING DefaultSDDLString, LPCGUID DeviceClassGuid,
                                             PDEVICE_OBJECT* DeviceObject);

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_WDMSEC_H */
