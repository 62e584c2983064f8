/* softndk kernel layer — wsk.h: WSK registration and the provider NPI (issue 9 §2). The WSK client can register,
 * capture the provider NPI and ask WskControlClient for the NDK extension (wskndk.h). Sockets are not
 * implemented: WskSocket, WskSocketConnect, WskGetAddressInfo and WskGetNameInfo return STATUS_NOT_SUPPORTED. */
#ifndef SOFTNDK_KM_WSK_H
#define SOFTNDK_KM_WSK_H

#include <softndk/km/ntddk.h>
#include <softndk/km/netioapi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WSKAPI NTAPI
#define MAKE_WSK_VERSION(Mj, Mn) ((USHORT)((Mj) << 8) | (USHORT)((Mn)&0xff))
#define WSK_MAJOR_VERSION(V) ((UCHAR)((V) >> 8))
#define WSK_MINOR_VERSION(V) ((UCHAR)(V))
#define WSK_NO_WAIT 0
#define WSK_INFINITE_WAIT 0xffffffff
#define WSK_FLAG_BASIC_SOCKET 0x00000000
#define WSK_FLAG_LISTEN_SOCKET 0x00000001
#define WSK_FLAG_CONNECTION_SOCKET 0x00000002
#define WSK_FLAG_DATAGRAM_SOCKET 0x00000004
#define WSK_SET_STATIC_EVENT_CALLBACKS 7
#define WSK_TDI_DEVICENAME_MAPPING 1
#define WSK_TDI_BEHAVIOR 2

typedef VOID WSK_CLIENT, *PWSK_CLIENT;
typedef struct _WSK_SOCKET {
    const VOID* Dispatch;
} WSK_SOCKET, *PWSK_SOCKET;
typedef NTSTATUS(WSKAPI* PFN_WSK_CLIENT_EVENT)(PVOID ClientContext, ULONG EventType, PVOID Information,
                                               SIZE_T InformationLength);
typedef struct _WSK_CLIENT_DISPATCH {
    USHORT Version;
    USHORT Reserved;
    PFN_WSK_CLIENT_EVENT WskClientEvent;
} WSK_CLIENT_DISPATCH, *PWSK_CLIENT_DISPATCH;
typedef struct _WSK_CLIENT_NPI {
    PVOID ClientContext;
    const WSK_CLIENT_DISPATCH* Dispatch;
} WSK_CLIENT_NPI, *PWSK_CLIENT_NPI;
typedef struct _WSK_REGISTRATION {
    ULONGLONG ReservedRegistrationState;
    PVOID ReservedRegistrationContext;
    KSPIN_LOCK ReservedRegistrationLock;
} WSK_REGISTRATION, *PWSK_REGISTRATION;

typedef NTSTATUS(WSKAPI* PFN_WSK_SOCKET)(PWSK_CLIENT Client, ADDRESS_FAMILY AddressFamily, USHORT SocketType,
                                         ULONG Protocol, ULONG Flags, PVOID SocketContext, const VOID* Dispatch,
                                         PEPROCESS OwningProcess, PETHREAD OwningThread, PVOID SecurityDescriptor,
                                         PIRP Irp);
typedef NTSTATUS(WSKAPI* PFN_WSK_SOCKET_CONNECT)(PWSK_CLIENT Client, USHORT SocketType, ULONG Protocol,
                                                 PSOCKADDR LocalAddress, PSOCKADDR RemoteAddress, ULONG Flags,
                                                 PVOID SocketContext, const VOID* Dispatch, PEPROCESS OwningProcess,
                                                 PETHREAD OwningThread, PVOID SecurityDescriptor, PIRP Irp);
typedef NTSTATUS(WSKAPI* PFN_WSK_CONTROL_CLIENT)(PWSK_CLIENT Client, ULONG ControlCode, SIZE_T InputSize,
                                                 PVOID InputBuffer, SIZE_T OutputSize, PVOID OutputBuffer,
                                                 SIZE_T* OutputSizeReturned, PIRP Irp);
typedef NTSTATUS(WSKAPI* PFN_WSK_GET_ADDRESS_INFO)(PWSK_CLIENT Client, PUNICODE_STRING NodeName,
                                                   PUNICODE_STRING ServiceName, ULONG NameSpace, GUID* Provider,
                                                   PVOID Hints, PVOID* Result, PEPROCESS OwningProcess,
                                                   PETHREAD OwningThread, PIRP Irp);
typedef VOID(WSKAPI* PFN_WSK_FREE_ADDRESS_INFO)(PWSK_CLIENT Client, PVOID AddrInfo);
typedef NTSTATUS(WSKAPI* PFN_WSK_GET_NAME_INFO)(PWSK_CLIENT Client, PSOCKADDR SockAddr, ULONG SockAddrLength,
                                                PUNICODE_STRING NodeName, PUNICODE_STRING ServiceName, ULONG Flags,
                                                PEPROCESS OwningProcess, PETHREAD OwningThread, PIRP Irp);
typedef struct _WSK_PROVIDER_DISPATCH {
    USHORT Version;
    USHORT Reserved;
    PFN_WSK_SOCKET WskSocket;
    PFN_WSK_SOCKET_CONNECT WskSocketConnect;
    PFN_WSK_CONTROL_CLIENT WskControlClient;
    PFN_WSK_GET_ADDRESS_INFO WskGetAddressInfo;
    PFN_WSK_FREE_ADDRESS_INFO WskFreeAddressInfo;
    PFN_WSK_GET_NAME_INFO WskGetNameInfo;
} WSK_PROVIDER_DISPATCH, *PWSK_PROVIDER_DISPATCH;
typedef struct _WSK_PROVIDER_NPI {
    PWSK_CLIENT Client;
    const WSK_PROVIDER_DISPATCH* Dispatch;
} WSK_PROVIDER_NPI, *PWSK_PROVIDER_NPI;

/* PASSIVE_LEVEL. WskCaptureProviderNPI waits up to WaitTimeout ms (the provider is always ready here). */
SOFTNDK_KM_API NTSTATUS WskRegister(PWSK_CLIENT_NPI WskClientNpi, PWSK_REGISTRATION WskRegistration);
SOFTNDK_KM_API VOID WskDeregister(PWSK_REGISTRATION WskRegistration);
SOFTNDK_KM_API NTSTATUS WskCaptureProviderNPI(PWSK_REGISTRATION WskRegistration, ULONG WaitTimeout,
                                              PWSK_PROVIDER_NPI WskProviderNpi);
SOFTNDK_KM_API VOID WskReleaseProviderNPI(PWSK_REGISTRATION WskRegistration);

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_WSK_H */
