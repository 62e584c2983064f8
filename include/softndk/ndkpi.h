/* softndk — Network Direct Kernel Provider Interface (ndkpi.h / ndkinfo.h) for user mode.
 * Names, member order and values follow Microsoft's published ndkpi.h and ndkinfo.h pages (docs/requirements.md
 * links them); where no page shows a value, docs/spec-decisions.md says where it came from.
 * Plain C: compiles as C11 and as C++20. */
#ifndef SOFTNDK_NDKPI_H
#define SOFTNDK_NDKPI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbols of the C ABI; everything else in libsoftndk is hidden. */
#ifndef SOFTNDK_API
#define SOFTNDK_API __attribute__((visibility("default")))
#endif

/* ---- Windows base types ---- */
#ifndef SOFTNDK_BASE_TYPES_DEFINED
#define SOFTNDK_BASE_TYPES_DEFINED
#define VOID void
typedef void* PVOID;
typedef char CHAR;
typedef unsigned char UCHAR;
typedef int16_t CSHORT;
typedef uint16_t USHORT;
typedef int32_t LONG;
typedef uint32_t ULONG;
typedef int64_t LONGLONG;
typedef uint64_t ULONGLONG;
typedef uint32_t UINT32;
typedef uint64_t UINT64;
typedef uint64_t ULONG64;
typedef uintptr_t ULONG_PTR;
typedef uintptr_t SIZE_T;
typedef uintptr_t KAFFINITY;
typedef UCHAR BOOLEAN;
typedef char* PCHAR;
typedef ULONG* PULONG;
typedef LONG NTSTATUS;
typedef NTSTATUS NDIS_STATUS;
typedef PVOID NDIS_HANDLE;
typedef ULONG NDIS_NIC_SWITCH_ID;
typedef ULONG NDIS_NIC_SWITCH_VPORT_ID;
#ifndef TRUE
#define TRUE 1
#endif
#ifndef FALSE
#define FALSE 0
#endif
#define MAXULONG 0xFFFFFFFFu
#ifndef CONST
#define CONST const
#endif
/* ntdef.h severity tests: bits 31..30 of the status are 00 success, 01 information, 10 warning, 11 error. */
#define NT_SUCCESS(Status) (((NTSTATUS)(Status)) >= 0)
#define NT_INFORMATION(Status) ((((ULONG)(Status)) >> 30) == 1)
#define NT_WARNING(Status) ((((ULONG)(Status)) >> 30) == 2)
#define NT_ERROR(Status) ((((ULONG)(Status)) >> 30) == 3)

typedef union _LARGE_INTEGER {
    struct {
        ULONG LowPart;
        LONG HighPart;
    };
    struct {
        ULONG LowPart;
        LONG HighPart;
    } u;
    LONGLONG QuadPart;
} LARGE_INTEGER, *PLARGE_INTEGER;
typedef LARGE_INTEGER PHYSICAL_ADDRESS, *PPHYSICAL_ADDRESS;

typedef struct _GUID {
    ULONG Data1;
    USHORT Data2;
    USHORT Data3;
    UCHAR Data4[8];
} GUID;

typedef struct _GROUP_AFFINITY {
    KAFFINITY Mask;
    USHORT Group;
    USHORT Reserved[3];
} GROUP_AFFINITY, *PGROUP_AFFINITY;

typedef struct _MDL MDL, *PMDL;
#endif /* SOFTNDK_BASE_TYPES_DEFINED */

/* Winsock-layout SOCKADDR, SOCKADDR_IN(6), SOCKADDR_STORAGE, SOCKADDR_INET, IN_ADDR, IN6_ADDR (issue 9 §1). */
#include <softndk/ws2def.h>

/* ---- NTSTATUS codes the pages name ---- */
#define STATUS_SUCCESS ((NTSTATUS)0x00000000L)
#define STATUS_PENDING ((NTSTATUS)0x00000103L)
#define STATUS_BUFFER_OVERFLOW ((NTSTATUS)0x80000005L)
#define STATUS_UNSUCCESSFUL ((NTSTATUS)0xC0000001L)
#define STATUS_ACCESS_VIOLATION ((NTSTATUS)0xC0000005L)
#define STATUS_INVALID_HANDLE ((NTSTATUS)0xC0000008L)
#define STATUS_INVALID_PARAMETER ((NTSTATUS)0xC000000DL)
#define STATUS_ACCESS_DENIED ((NTSTATUS)0xC0000022L)
#define STATUS_BUFFER_TOO_SMALL ((NTSTATUS)0xC0000023L)
#define STATUS_INVALID_PARAMETER_MIX ((NTSTATUS)0xC0000030L)
#define STATUS_OBJECT_PATH_NOT_FOUND ((NTSTATUS)0xC000003AL)
#define STATUS_SHARING_VIOLATION ((NTSTATUS)0xC0000043L)
#define STATUS_INSUFFICIENT_RESOURCES ((NTSTATUS)0xC000009AL)
#define STATUS_WORKING_SET_QUOTA ((NTSTATUS)0xC00000A1L)
#define STATUS_IO_TIMEOUT ((NTSTATUS)0xC00000B5L)
#define STATUS_NOT_SUPPORTED ((NTSTATUS)0xC00000BBL)
#ifndef STATUS_NOT_FOUND
#define STATUS_NOT_FOUND ((NTSTATUS)0xC0000225L)
#endif
#define STATUS_INTERNAL_ERROR ((NTSTATUS)0xC00000E5L)
#define STATUS_CANCELLED ((NTSTATUS)0xC0000120L)
#define STATUS_REMOTE_RESOURCES ((NTSTATUS)0xC000013DL)
#define STATUS_INVALID_ADDRESS ((NTSTATUS)0xC0000141L)
#define STATUS_INVALID_DEVICE_STATE ((NTSTATUS)0xC0000184L)
#define STATUS_TOO_MANY_ADDRESSES ((NTSTATUS)0xC0000209L)
#define STATUS_ADDRESS_ALREADY_EXISTS ((NTSTATUS)0xC000020AL)
#define STATUS_CONNECTION_DISCONNECTED ((NTSTATUS)0xC000020CL)
#define STATUS_CONNECTION_RESET ((NTSTATUS)0xC000020DL)
#define STATUS_CONNECTION_REFUSED ((NTSTATUS)0xC0000236L)
#define STATUS_CONNECTION_INVALID ((NTSTATUS)0xC000023AL)
#define STATUS_NETWORK_UNREACHABLE ((NTSTATUS)0xC000023CL)
#define STATUS_HOST_UNREACHABLE ((NTSTATUS)0xC000023DL)
#define STATUS_REQUEST_ABORTED ((NTSTATUS)0xC0000240L)
#define STATUS_CONNECTION_ABORTED ((NTSTATUS)0xC0000241L)
#define STATUS_IMPLEMENTATION_LIMIT ((NTSTATUS)0xC000042BL)
#define NDIS_STATUS_SUCCESS STATUS_SUCCESS
#define NDIS_STATUS_PENDING STATUS_PENDING
#define NDIS_STATUS_RESOURCES STATUS_INSUFFICIENT_RESOURCES
#define NDIS_STATUS_BAD_VERSION ((NDIS_STATUS)0xC0010004L)
#define NDIS_STATUS_ADAPTER_NOT_READY ((NDIS_STATUS)0xC0010011L)

/* ---- Versions ---- */
typedef struct _NDK_VERSION {
    USHORT Major;
    USHORT Minor;
} NDK_VERSION;
#define NDK_VERSION_MAJOR 1
#define NDK_VERSION_1_1_MINOR 1
#define NDK_VERSION_1_2_MINOR 2
/* NDKPI 2.x (spec decision "NDK 2.x"). The names are softndk's: no public source shows the WDK's own constants
 * for 2.x. NDKPI 2.1 is where the pages put NdkCompleteConnectEx, NdkAcceptEx and NdkDisconnectEventCallbackEx
 * ("Supported in NDKPI 2.1 and later") and NDK_RESULT_EX.ProviderErrorCode (the "2.1 memory layout"). Windows'
 * own type records (Windows 10 1607 … Windows 11) show no other change: the dispatch tables below, the 2.1
 * connector slots at their end, and NDK_ADAPTER_INFO the same 104 bytes (x64) for 1.x and 2.x consumers. */
#define NDK_VERSION_2_MAJOR 2
#define NDK_VERSION_2_0_MINOR 0
#define NDK_VERSION_2_1_MINOR 1

/* ---- Enumerations ---- */
typedef enum _NDK_OBJECT_TYPE {
    NdkObjectTypeUndefined = 0,
    NdkObjectTypeAdapter = 1,
    NdkObjectTypeQp = 2,
    NdkObjectTypeCq = 3,
    NdkObjectTypeMr = 4,
    NdkObjectTypeMw = 5,
    NdkObjectTypePd = 6,
    NdkObjectTypeSharedEndpoint = 7,
    NdkObjectTypeConnector = 8,
    NdkObjectTypeListener = 9,
    NdkObjectTypeSrq = 10,
    NdkObjectTypeMax = 11
} NDK_OBJECT_TYPE;

/* AMB-04: header values, not 0..7. */
typedef enum _NDK_OPERATION_TYPE {
    NdkOperationTypeReceiveAndInvalidate = 0x8001,
    NdkOperationTypeReceive = 0x0001,
    NdkOperationTypeSend = 0x0002,
    NdkOperationTypeFastRegister = 0x0004,
    NdkOperationTypeBind = 0x0008,
    NdkOperationTypeInvalidate = 0x0010,
    NdkOperationTypeRead = 0x0020,
    NdkOperationTypeWrite = 0x0040
} NDK_OPERATION_TYPE;

typedef enum _NDK_RDMA_TECHNOLOGY {
    NdkUndefined = 0,
    NdkiWarp = 1,
    NdkInfiniBand = 2,
    NdkRoCE = 3,
    NdkRoCEv2 = 4,
    NdkMaxTechnology = 5
} NDK_RDMA_TECHNOLOGY;

/* ---- Flags ---- */
#define NDK_MR_FLAG_ALLOW_LOCAL_READ 0x00000000
#define NDK_MR_FLAG_ALLOW_LOCAL_WRITE 0x00000001
#define NDK_MR_FLAG_ALLOW_REMOTE_READ 0x00000002
#define NDK_MR_FLAG_ALLOW_REMOTE_WRITE 0x00000005 /* AMB-01: includes local write */
#define NDK_MR_FLAG_RDMA_READ_SINK 0x00000008

#define NDK_OP_FLAG_SILENT_SUCCESS 0x00000001
#define NDK_OP_FLAG_READ_FENCE 0x00000002
#define NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT 0x00000004
#define NDK_OP_FLAG_ALLOW_REMOTE_READ 0x00000008
#define NDK_OP_FLAG_ALLOW_LOCAL_WRITE 0x00000010
#define NDK_OP_FLAG_ALLOW_REMOTE_WRITE 0x00000030 /* AMB-01: includes local write */
#define NDK_OP_FLAG_INLINE 0x00000040
#define NDK_OP_FLAG_RDMA_READ_SINK 0x00000080
#define NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE 0x00000100 /* AMB-02: header value */
#define NDK_OP_FLAG_DEFER 0x00000200

#define NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED 0x00000001
#define NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED 0x00000002
#define NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED 0x00000004
#define NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED 0x00000008
#define NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED 0x00000010
#define NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED 0x00000100
#define NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED 0x00010000

#define NDK_CQ_NOTIFY_ERRORS 0
#define NDK_CQ_NOTIFY_ANY 1
#define NDK_CQ_NOTIFY_SOLICITED 2

/* ---- Structures ---- */
typedef struct _NDK_OBJECT_HEADER_RESERVED_BLOCK {
    PVOID rf[4];
} NDK_OBJECT_HEADER_RESERVED_BLOCK;

typedef struct _NDK_OBJECT_HEADER {
    NDK_VERSION Version;
    NDK_OBJECT_TYPE ObjectType;
    NDK_OBJECT_HEADER_RESERVED_BLOCK NdkReserved;
} NDK_OBJECT_HEADER;

typedef struct _NDK_EXTENSION_INTERFACE {
    const VOID* Dispatch;
} NDK_EXTENSION_INTERFACE;

typedef PHYSICAL_ADDRESS NDK_LOGICAL_ADDRESS;

typedef struct _NDK_SGE {
    union {
        PVOID VirtualAddress;
        NDK_LOGICAL_ADDRESS LogicalAddress;
    };
    ULONG Length;
    UINT32 MemoryRegionToken;
} NDK_SGE;

typedef struct _NDK_RESULT {
    NTSTATUS Status;
    /* Valid only for the completion of a receive (NdkReceive, NdkSrqReceive): the bytes the Send placed. The spec
       leaves it undefined for every other request; softndk writes 0 there, but a portable consumer ignores it. */
    ULONG BytesTransferred;
    PVOID QPContext;
    PVOID RequestContext;
} NDK_RESULT;

typedef struct _NDK_RESULT_EX {
    NTSTATUS Status;
    ULONG BytesTransferred; /* receives only, as in NDK_RESULT */
    PVOID QPContext;
    PVOID RequestContext;
    NDK_OPERATION_TYPE Type;
    ULONG ProviderErrorCode;
    ULONG_PTR TypeSpecificCompletionOutput;
} NDK_RESULT_EX;

typedef struct _NDK_LOGICAL_ADDRESS_MAPPING {
    PVOID AdapterContext;
    ULONG AdapterPageCount;
    NDK_LOGICAL_ADDRESS AdapterPageArray[1];
} NDK_LOGICAL_ADDRESS_MAPPING;

/* Bytes needed for a LAM of n pages. */
#define NDK_LAM_SIZE(n) \
    ((ULONG)(offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray) + (n) * sizeof(NDK_LOGICAL_ADDRESS)))

typedef struct _NDK_ADAPTER_INFO {
    NDK_VERSION Version;
    UINT32 VendorId;
    UINT32 DeviceId;
    SIZE_T MaxRegistrationSize;
    SIZE_T MaxWindowSize;
    ULONG FRMRPageCount;
    ULONG MaxInitiatorRequestSge;
    ULONG MaxReceiveRequestSge;
    ULONG MaxReadRequestSge;
    ULONG MaxTransferLength;
    ULONG MaxInlineDataSize;
    ULONG MaxInboundReadLimit;
    ULONG MaxOutboundReadLimit;
    ULONG MaxReceiveQueueDepth;
    ULONG MaxInitiatorQueueDepth;
    ULONG MaxSrqDepth;
    ULONG MaxCqDepth;
    ULONG LargeRequestThreshold;
    ULONG MaxCallerData;
    ULONG MaxCalleeData;
    ULONG AdapterFlags;
    NDK_RDMA_TECHNOLOGY RdmaTechnology;
} NDK_ADAPTER_INFO;

/* ---- Object structs ---- */
typedef struct _NDK_ADAPTER NDK_ADAPTER;
typedef struct _NDK_PD NDK_PD;
typedef struct _NDK_CQ NDK_CQ;
typedef struct _NDK_QP NDK_QP;
typedef struct _NDK_SRQ NDK_SRQ;
typedef struct _NDK_MR NDK_MR;
typedef struct _NDK_MW NDK_MW;
typedef struct _NDK_CONNECTOR NDK_CONNECTOR;
typedef struct _NDK_LISTENER NDK_LISTENER;
typedef struct _NDK_SHARED_ENDPOINT NDK_SHARED_ENDPOINT;

/* ---- Consumer callbacks ---- */
typedef VOID (*NDK_FN_CLOSE_COMPLETION)(PVOID Context);
typedef VOID (*NDK_FN_CREATE_COMPLETION)(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* pNdkObject);
typedef VOID (*NDK_FN_REQUEST_COMPLETION)(PVOID Context, NTSTATUS Status);
typedef VOID (*NDK_FN_CQ_NOTIFICATION_CALLBACK)(PVOID CqNotificationContext, NTSTATUS CqStatus);
typedef VOID (*NDK_FN_SRQ_NOTIFICATION_CALLBACK)(PVOID SrqNotificationContext, NTSTATUS SrqStatus);
typedef VOID (*NDK_FN_CONNECT_EVENT_CALLBACK)(PVOID ConnectEventContext, NDK_CONNECTOR* pNdkConnector);
typedef VOID (*NDK_FN_DISCONNECT_EVENT_CALLBACK)(PVOID DisconnectEventContext);
typedef VOID (*NDK_FN_DISCONNECT_EVENT_CALLBACK_EX)(PVOID DisconnectEventContext, ULONG ProviderDisconnectReason);

/* ---- Provider functions ---- */
typedef NTSTATUS (*NDK_FN_CLOSE_OBJECT)(NDK_OBJECT_HEADER* pNdkObject, NDK_FN_CLOSE_COMPLETION CloseCompletion,
                                        PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_QUERY_EXTENSION_INTERFACE)(NDK_OBJECT_HEADER* pNdkObject, GUID* ExtensionInterfaceID,
                                                     NDK_VERSION ExtensionInterfaceVersion,
                                                     NDK_EXTENSION_INTERFACE* pExtensionInterface);
/* adapter */
typedef NTSTATUS (*NDK_FN_QUERY_ADAPTER_INFO)(NDK_ADAPTER* pNdkAdapter, NDK_ADAPTER_INFO* pInfo, ULONG* pBufferSize);
typedef NTSTATUS (*NDK_FN_CREATE_CQ)(NDK_ADAPTER* pNdkAdapter, ULONG CqDepth,
                                     NDK_FN_CQ_NOTIFICATION_CALLBACK CqNotification, PVOID CqNotificationContext,
                                     GROUP_AFFINITY* Affinity, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     PVOID RequestContext, NDK_CQ** ppNdkCq);
typedef NTSTATUS (*NDK_FN_CREATE_PD)(NDK_ADAPTER* pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     PVOID RequestContext, NDK_PD** ppNdkPd);
typedef NTSTATUS (*NDK_FN_CREATE_SHARED_ENDPOINT)(NDK_ADAPTER* pNdkAdapter, const PSOCKADDR pAddress,
                                                  ULONG AddressLength, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                                  PVOID RequestContext, NDK_SHARED_ENDPOINT** ppNdkSharedEndpoint);
typedef NTSTATUS (*NDK_FN_CREATE_CONNECTOR)(NDK_ADAPTER* pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                            PVOID RequestContext, NDK_CONNECTOR** ppNdkConnector);
typedef NTSTATUS (*NDK_FN_CREATE_LISTENER)(NDK_ADAPTER* pNdkAdapter, NDK_FN_CONNECT_EVENT_CALLBACK ConnectEvent,
                                           PVOID ConnectEventContext, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                           PVOID RequestContext, NDK_LISTENER** ppNdkListener);
typedef NTSTATUS (*NDK_FN_BUILD_LAM)(NDK_ADAPTER* pNdkAdapter, MDL* Mdl, SIZE_T Length,
                                     NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext,
                                     NDK_LOGICAL_ADDRESS_MAPPING* pNdkLAM, ULONG* pLAMSize, ULONG* pFBO);
typedef VOID (*NDK_FN_RELEASE_LAM)(NDK_ADAPTER* pNdkAdapter, NDK_LOGICAL_ADDRESS_MAPPING* pNdkLAM);
/* CQ */
typedef NTSTATUS (*NDK_FN_RESIZE_CQ)(NDK_CQ* pNdkCq, ULONG CqDepth, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                     PVOID RequestContext);
typedef VOID (*NDK_FN_ARM_CQ)(NDK_CQ* pNdkCq, ULONG Type);
typedef ULONG (*NDK_FN_GET_CQ_RESULTS)(NDK_CQ* pNdkCq, NDK_RESULT Results[], ULONG nResults);
typedef ULONG (*NDK_FN_GET_CQ_RESULTS_EX)(NDK_CQ* pNdkCq, NDK_RESULT_EX Results[], ULONG nResults);
typedef NTSTATUS (*NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION)(NDK_CQ* pNdkCq, ULONG ModerationInterval,
                                                           ULONG ModerationCount);
/* PD */
typedef NTSTATUS (*NDK_FN_CREATE_MR)(NDK_PD* pNdkPd, BOOLEAN FastRegister, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     PVOID RequestContext, NDK_MR** ppNdkMr);
typedef NTSTATUS (*NDK_FN_CREATE_MW)(NDK_PD* pNdkPd, NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                     NDK_MW** ppNdkMw);
typedef NTSTATUS (*NDK_FN_CREATE_SRQ)(NDK_PD* pNdkPd, ULONG SrqDepth, ULONG MaxReceiveRequestSge, ULONG NotifyThreshold,
                                      NDK_FN_SRQ_NOTIFICATION_CALLBACK SrqNotification, PVOID SrqNotificationContext,
                                      GROUP_AFFINITY* Affinity, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                      PVOID RequestContext, NDK_SRQ** ppNdkSrq);
typedef NTSTATUS (*NDK_FN_CREATE_QP)(NDK_PD* pNdkPd, NDK_CQ* pReceiveCq, NDK_CQ* pInitiatorCq, PVOID QPContext,
                                     ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth, ULONG MaxReceiveRequestSge,
                                     ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                     NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext, NDK_QP** ppNdkQp);
typedef NTSTATUS (*NDK_FN_CREATE_QP_WITH_SRQ)(NDK_PD* pNdkPd, NDK_CQ* pReceiveCq, NDK_CQ* pInitiatorCq, NDK_SRQ* pSrq,
                                              PVOID QPContext, ULONG InitiatorQueueDepth, ULONG MaxInitiatorRequestSge,
                                              ULONG InlineDataSize, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                              PVOID RequestContext, NDK_QP** ppNdkQp);
typedef VOID (*NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN)(NDK_PD* pNdkPd, UINT32* pPrivilegedMemoryRegionToken);
/* MR */
typedef NTSTATUS (*NDK_FN_REGISTER_MR)(NDK_MR* pNdkMr, MDL* Mdl, SIZE_T Length, ULONG Flags,
                                       NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_DEREGISTER_MR)(NDK_MR* pNdkMr, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                         PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_INITIALIZE_FAST_REGISTER_MR)(NDK_MR* pNdkMr, ULONG AdapterPageCount, BOOLEAN RemoteAccess,
                                                       NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                                       PVOID RequestContext);
typedef UINT32 (*NDK_FN_GET_REMOTE_TOKEN_FROM_MR)(NDK_MR* pNdkMr);
typedef UINT32 (*NDK_FN_GET_LOCAL_TOKEN_FROM_MR)(NDK_MR* pNdkMr);
/* MW */
typedef UINT32 (*NDK_FN_GET_REMOTE_TOKEN_FROM_MW)(NDK_MW* pNdkMw);
/* SRQ */
typedef NTSTATUS (*NDK_FN_MODIFY_SRQ)(NDK_SRQ* pNdkSrq, ULONG SrqDepth, ULONG NotifyThreshold,
                                      NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_SRQ_RECEIVE)(NDK_SRQ* pNdkSrq, PVOID RequestContext, const NDK_SGE* pSgl, ULONG nSge);
/* QP */
typedef VOID (*NDK_FN_FLUSH)(NDK_QP* pNdkQp);
typedef NTSTATUS (*NDK_FN_SEND)(NDK_QP* pNdkQp, PVOID RequestContext, const NDK_SGE* pSgl, ULONG nSge, ULONG Flags);
typedef NTSTATUS (*NDK_FN_SEND_AND_INVALIDATE)(NDK_QP* pNdkQp, PVOID RequestContext, const NDK_SGE* pSgl, ULONG nSge,
                                               ULONG Flags, UINT32 RemoteToken);
typedef NTSTATUS (*NDK_FN_RECEIVE)(NDK_QP* pNdkQp, PVOID RequestContext, const NDK_SGE* pSgl, ULONG nSge);
typedef NTSTATUS (*NDK_FN_BIND)(NDK_QP* pNdkQp, PVOID RequestContext, NDK_MR* pMr, NDK_MW* pMw, PVOID VirtualAddress,
                                SIZE_T Length, ULONG Flags);
typedef NTSTATUS (*NDK_FN_FAST_REGISTER)(NDK_QP* pNdkQp, PVOID RequestContext, NDK_MR* pMr, ULONG AdapterPageCount,
                                         const NDK_LOGICAL_ADDRESS* AdapterPageArray, ULONG FBO, SIZE_T Length,
                                         PVOID BaseVirtualAddress, ULONG Flags);
typedef NTSTATUS (*NDK_FN_INVALIDATE)(NDK_QP* pNdkQp, PVOID RequestContext, NDK_OBJECT_HEADER* pNdkMrOrMw, ULONG Flags);
typedef NTSTATUS (*NDK_FN_READ)(NDK_QP* pNdkQp, PVOID RequestContext, const NDK_SGE* pSgl, ULONG nSge,
                                UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags);
typedef NTSTATUS (*NDK_FN_WRITE)(NDK_QP* pNdkQp, PVOID RequestContext, const NDK_SGE* pSgl, ULONG nSge,
                                 UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags);
/* connector */
typedef NTSTATUS (*NDK_FN_CONNECT)(NDK_CONNECTOR* pNdkConnector, NDK_QP* pNdkQp, const PSOCKADDR pSrcAddress,
                                   ULONG SrcAddressLength, const PSOCKADDR pDestAddress, ULONG DestAddressLength,
                                   ULONG InboundReadLimit, ULONG OutboundReadLimit, const PVOID pPrivateData,
                                   ULONG PrivateDataLength, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                   PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_CONNECT_WITH_SHARED_ENDPOINT)(
    NDK_CONNECTOR* pNdkConnector, NDK_QP* pNdkQp, NDK_SHARED_ENDPOINT* pNdkSharedEndpoint, const PSOCKADDR pDestAddress,
    ULONG DestAddressLength, ULONG InboundReadLimit, ULONG OutboundReadLimit, const PVOID pPrivateData,
    ULONG PrivateDataLength, NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_COMPLETE_CONNECT)(NDK_CONNECTOR* pNdkConnector,
                                            NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent,
                                            PVOID DisconnectEventContext, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                            PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_COMPLETE_CONNECT_EX)(NDK_CONNECTOR* pNdkConnector,
                                               NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent,
                                               PVOID DisconnectEventContext,
                                               NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_ACCEPT)(NDK_CONNECTOR* pNdkConnector, NDK_QP* pNdkQp, ULONG InboundReadLimit,
                                  ULONG OutboundReadLimit, const PVOID pPrivateData, ULONG PrivateDataLength,
                                  NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent, PVOID DisconnectEventContext,
                                  NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_ACCEPT_EX)(NDK_CONNECTOR* pNdkConnector, NDK_QP* pNdkQp, ULONG InboundReadLimit,
                                     ULONG OutboundReadLimit, const PVOID pPrivateData, ULONG PrivateDataLength,
                                     NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent, PVOID DisconnectEventContext,
                                     NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_REJECT)(NDK_CONNECTOR* pNdkConnector, const PVOID pPrivateData, ULONG PrivateDataLength);
typedef NTSTATUS (*NDK_FN_GET_CONNECTION_DATA)(NDK_CONNECTOR* pNdkConnector, ULONG* pInboundReadLimit,
                                               ULONG* pOutboundReadLimit, PVOID pPrivateData,
                                               ULONG* pPrivateDataLength);
typedef NTSTATUS (*NDK_FN_GET_LOCAL_ADDRESS)(NDK_CONNECTOR* pNdkConnector, PSOCKADDR pAddress, ULONG* pAddressLength);
typedef NTSTATUS (*NDK_FN_GET_PEER_ADDRESS)(NDK_CONNECTOR* pNdkConnector, PSOCKADDR pAddress, ULONG* pAddressLength);
typedef NTSTATUS (*NDK_FN_DISCONNECT)(NDK_CONNECTOR* pNdkConnector, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                      PVOID RequestContext);
/* listener */
typedef NTSTATUS (*NDK_FN_LISTEN)(NDK_LISTENER* pNdkListener, const PSOCKADDR pAddress, ULONG AddressLength,
                                  NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_GET_LISTENER_LOCAL_ADDRESS)(NDK_LISTENER* pNdkListener, PSOCKADDR pAddress,
                                                      ULONG* pAddressLength);
typedef VOID (*NDK_FN_CONTROL_CONNECT_EVENTS)(NDK_LISTENER* pNdkListener, BOOLEAN Pause);
/* shared endpoint */
typedef NTSTATUS (*NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS)(NDK_SHARED_ENDPOINT* pNdkSharedEndpoint,
                                                             PSOCKADDR pAddress, ULONG* pAddressLength);

/* ---- Dispatch tables: member order is the binary contract ---- */
typedef struct _NDK_ADAPTER_DISPATCH {
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_QUERY_ADAPTER_INFO NdkQueryAdapterInfo;
    NDK_FN_CREATE_CQ NdkCreateCq;
    NDK_FN_CREATE_PD NdkCreatePd;
    NDK_FN_CREATE_SHARED_ENDPOINT NdkCreateSharedEndpoint;
    NDK_FN_CREATE_CONNECTOR NdkCreateConnector;
    NDK_FN_CREATE_LISTENER NdkCreateListener;
    NDK_FN_BUILD_LAM NdkBuildLAM;
    NDK_FN_RELEASE_LAM NdkReleaseLAM;
} NDK_ADAPTER_DISPATCH;

typedef struct _NDK_CONNECTOR_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseConnector;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_CONNECT NdkConnect;
    NDK_FN_CONNECT_WITH_SHARED_ENDPOINT NdkConnectWithSharedEndpoint;
    NDK_FN_COMPLETE_CONNECT NdkCompleteConnect;
    NDK_FN_ACCEPT NdkAccept;
    NDK_FN_REJECT NdkReject;
    NDK_FN_GET_CONNECTION_DATA NdkGetConnectionData;
    NDK_FN_GET_LOCAL_ADDRESS NdkGetLocalAddress;
    NDK_FN_GET_PEER_ADDRESS NdkGetPeerAddress;
    NDK_FN_DISCONNECT NdkDisconnect;
    NDK_FN_COMPLETE_CONNECT_EX NdkCompleteConnectEx;
    NDK_FN_ACCEPT_EX NdkAcceptEx;
} NDK_CONNECTOR_DISPATCH;

typedef struct _NDK_CQ_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseCq;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_RESIZE_CQ NdkResizeCq;
    NDK_FN_ARM_CQ NdkArmCq;
    NDK_FN_GET_CQ_RESULTS NdkGetCqResults;
    NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION NdkControlCqInterruptModeration;
    NDK_FN_GET_CQ_RESULTS_EX NdkGetCqResultsEx;
} NDK_CQ_DISPATCH;

typedef struct _NDK_LISTENER_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseListener;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_LISTEN NdkListen;
    NDK_FN_GET_LISTENER_LOCAL_ADDRESS NdkGetLocalAddress;
    NDK_FN_CONTROL_CONNECT_EVENTS NdkControlConnectEvents;
} NDK_LISTENER_DISPATCH;

typedef struct _NDK_MR_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseMr;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_REGISTER_MR NdkRegisterMr;
    NDK_FN_DEREGISTER_MR NdkDeregisterMr;
    NDK_FN_INITIALIZE_FAST_REGISTER_MR NdkInitializeFastRegisterMr;
    NDK_FN_GET_REMOTE_TOKEN_FROM_MR NdkGetRemoteTokenFromMr;
    NDK_FN_GET_LOCAL_TOKEN_FROM_MR NdkGetLocalTokenFromMr;
} NDK_MR_DISPATCH;

typedef struct _NDK_MW_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseMw;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_GET_REMOTE_TOKEN_FROM_MW NdkGetRemoteTokenFromMw;
} NDK_MW_DISPATCH;

typedef struct _NDK_PD_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkClosePd;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_CREATE_MR NdkCreateMr;
    NDK_FN_CREATE_MW NdkCreateMw;
    NDK_FN_CREATE_SRQ NdkCreateSrq;
    NDK_FN_CREATE_QP NdkCreateQp;
    NDK_FN_CREATE_QP_WITH_SRQ NdkCreateQpWithSrq;
    NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN NdkGetPrivilegedMemoryRegionToken;
} NDK_PD_DISPATCH;

typedef struct _NDK_QP_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseQp;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_FLUSH NdkFlush;
    NDK_FN_SEND NdkSend;
    NDK_FN_RECEIVE NdkReceive;
    NDK_FN_BIND NdkBind;
    NDK_FN_FAST_REGISTER NdkFastRegister;
    NDK_FN_INVALIDATE NdkInvalidate;
    NDK_FN_READ NdkRead;
    NDK_FN_WRITE NdkWrite;
    NDK_FN_SEND_AND_INVALIDATE NdkSendAndInvalidate;
} NDK_QP_DISPATCH;

typedef struct _NDK_SHARED_ENDPOINT_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseSharedEndpoint;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS NdkGetLocalAddress;
} NDK_SHARED_ENDPOINT_DISPATCH;

typedef struct _NDK_SRQ_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseSrq;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_MODIFY_SRQ NdkModifySrq;
    NDK_FN_SRQ_RECEIVE NdkSrqReceive;
} NDK_SRQ_DISPATCH;

#define SOFTNDK_DECLARE_OBJECT(Obj, DispatchType) \
    struct _##Obj {                               \
        NDK_OBJECT_HEADER Header;                 \
        const DispatchType* Dispatch;             \
    }
SOFTNDK_DECLARE_OBJECT(NDK_ADAPTER, NDK_ADAPTER_DISPATCH);
SOFTNDK_DECLARE_OBJECT(NDK_PD, NDK_PD_DISPATCH);
SOFTNDK_DECLARE_OBJECT(NDK_CQ, NDK_CQ_DISPATCH);
SOFTNDK_DECLARE_OBJECT(NDK_QP, NDK_QP_DISPATCH);
SOFTNDK_DECLARE_OBJECT(NDK_SRQ, NDK_SRQ_DISPATCH);
SOFTNDK_DECLARE_OBJECT(NDK_MR, NDK_MR_DISPATCH);
SOFTNDK_DECLARE_OBJECT(NDK_MW, NDK_MW_DISPATCH);
SOFTNDK_DECLARE_OBJECT(NDK_CONNECTOR, NDK_CONNECTOR_DISPATCH);
SOFTNDK_DECLARE_OBJECT(NDK_LISTENER, NDK_LISTENER_DISPATCH);
SOFTNDK_DECLARE_OBJECT(NDK_SHARED_ENDPOINT, NDK_SHARED_ENDPOINT_DISPATCH);
#undef SOFTNDK_DECLARE_OBJECT

/* ---- Pointer typedefs kernel consumers spell (PNDK_*) ---- */
typedef NDK_VERSION* PNDK_VERSION;
typedef NDK_OBJECT_HEADER* PNDK_OBJECT_HEADER;
typedef NDK_EXTENSION_INTERFACE* PNDK_EXTENSION_INTERFACE;
typedef NDK_LOGICAL_ADDRESS* PNDK_LOGICAL_ADDRESS;
typedef NDK_SGE* PNDK_SGE;
typedef NDK_RESULT* PNDK_RESULT;
typedef NDK_RESULT_EX* PNDK_RESULT_EX;
typedef NDK_LOGICAL_ADDRESS_MAPPING* PNDK_LOGICAL_ADDRESS_MAPPING;
typedef NDK_ADAPTER_INFO* PNDK_ADAPTER_INFO;
typedef NDK_ADAPTER* PNDK_ADAPTER;
typedef NDK_PD* PNDK_PD;
typedef NDK_CQ* PNDK_CQ;
typedef NDK_QP* PNDK_QP;
typedef NDK_SRQ* PNDK_SRQ;
typedef NDK_MR* PNDK_MR;
typedef NDK_MW* PNDK_MW;
typedef NDK_CONNECTOR* PNDK_CONNECTOR;
typedef NDK_LISTENER* PNDK_LISTENER;
typedef NDK_SHARED_ENDPOINT* PNDK_SHARED_ENDPOINT;
typedef NDK_ADAPTER_DISPATCH* PNDK_ADAPTER_DISPATCH;
typedef NDK_PD_DISPATCH* PNDK_PD_DISPATCH;
typedef NDK_CQ_DISPATCH* PNDK_CQ_DISPATCH;
typedef NDK_QP_DISPATCH* PNDK_QP_DISPATCH;
typedef NDK_SRQ_DISPATCH* PNDK_SRQ_DISPATCH;
typedef NDK_MR_DISPATCH* PNDK_MR_DISPATCH;
typedef NDK_MW_DISPATCH* PNDK_MW_DISPATCH;
typedef NDK_CONNECTOR_DISPATCH* PNDK_CONNECTOR_DISPATCH;
typedef NDK_LISTENER_DISPATCH* PNDK_LISTENER_DISPATCH;
typedef NDK_SHARED_ENDPOINT_DISPATCH* PNDK_SHARED_ENDPOINT_DISPATCH;

/* ---- NDIS-side structures ---- */
typedef struct _NDIS_OBJECT_HEADER {
    UCHAR Type;
    UCHAR Revision;
    USHORT Size;
} NDIS_OBJECT_HEADER;

typedef struct _NDIS_OPEN_NDK_ADAPTER_PARAMETERS {
    NDK_VERSION Version;
    NDIS_NIC_SWITCH_ID SwitchId;
    NDIS_NIC_SWITCH_VPORT_ID VPortId;
} NDIS_OPEN_NDK_ADAPTER_PARAMETERS, *PNDIS_OPEN_NDK_ADAPTER_PARAMETERS;

typedef NDIS_STATUS (*OPEN_NDK_ADAPTER_HANDLER)(NDIS_HANDLE MiniportAdapterContext,
                                                PNDIS_OPEN_NDK_ADAPTER_PARAMETERS Parameters,
                                                NDK_ADAPTER** ppNdkAdapter);
typedef VOID (*CLOSE_NDK_ADAPTER_HANDLER)(NDIS_HANDLE MiniportAdapterContext, NDK_ADAPTER* pNdkAdapter);

typedef struct _NDIS_NDK_PROVIDER_CHARACTERISTICS {
    NDIS_OBJECT_HEADER Header;
    ULONG Flags;
    OPEN_NDK_ADAPTER_HANDLER OpenNDKAdapterHandler;
    CLOSE_NDK_ADAPTER_HANDLER CloseNDKAdapterHandler;
} NDIS_NDK_PROVIDER_CHARACTERISTICS, *PNDIS_NDK_PROVIDER_CHARACTERISTICS;

typedef struct _NDIS_NDK_CAPABILITIES {
    NDIS_OBJECT_HEADER Header;
    ULONG Flags;
    ULONG MaxQpCount;
    ULONG MaxCqCount;
    ULONG MaxMrCount;
    ULONG MaxPdCount;
    ULONG MaxInboundReadLimit;
    ULONG MaxOutboundReadLimit;
    ULONG MaxMwCount;
    ULONG MaxSrqCount;
    ULONG64 MissingCounterMask;
    NDK_ADAPTER_INFO* NdkInfo;
} NDIS_NDK_CAPABILITIES, *PNDIS_NDK_CAPABILITIES;

typedef struct _NDIS_MINIPORT_ADAPTER_NDK_ATTRIBUTES {
    NDIS_OBJECT_HEADER Header;
    BOOLEAN Enabled;
    PNDIS_NDK_CAPABILITIES NdkCapabilities;
} NDIS_MINIPORT_ADAPTER_NDK_ATTRIBUTES;

typedef struct _NDIS_NDK_CONNECTION_ENTRY {
    SOCKADDR_INET Local;
    SOCKADDR_INET Remote;
    BOOLEAN UserModeOwner;
    ULONG OwnerPid;
} NDIS_NDK_CONNECTION_ENTRY;

typedef struct _NDIS_NDK_CONNECTIONS {
    NDIS_OBJECT_HEADER Header;
    ULONG Flags;
    ULONG Count;
    BOOLEAN NDConnectionsMappedtoTCPConnections;
    NDIS_NDK_CONNECTION_ENTRY Connections[1];
} NDIS_NDK_CONNECTIONS;

typedef struct _NDIS_NDK_LOCAL_ENDPOINT_ENTRY {
    SOCKADDR_INET Local;
    BOOLEAN UserModeOwner;
    BOOLEAN Listener;
    ULONG OwnerPid;
} NDIS_NDK_LOCAL_ENDPOINT_ENTRY;

typedef struct _NDIS_NDK_LOCAL_ENDPOINTS {
    NDIS_OBJECT_HEADER Header;
    ULONG Flags;
    ULONG Count;
    BOOLEAN NDLocalEndpointsMappedtoTCPLocalEndpoints;
    NDIS_NDK_LOCAL_ENDPOINT_ENTRY LocalEndpoints[1];
} NDIS_NDK_LOCAL_ENDPOINTS;

typedef struct _NDIS_NDK_PERFORMANCE_COUNTERS {
    ULONG64 Connect;
    ULONG64 Accept;
    ULONG64 ConnectFailure;
    ULONG64 ConnectionError;
    ULONG64 ActiveConnection;
    ULONG64 Reserved01, Reserved02, Reserved03, Reserved04, Reserved05;
    ULONG64 Reserved06, Reserved07, Reserved08, Reserved09, Reserved10;
    ULONG64 Reserved11, Reserved12, Reserved13, Reserved14, Reserved15;
    ULONG64 Reserved16, Reserved17, Reserved18, Reserved19, Reserved20;
    ULONG64 CQError;
    ULONG64 RDMAInOctets;
    ULONG64 RDMAOutOctets;
    ULONG64 RDMAInFrames;
    ULONG64 RDMAOutFrames;
} NDIS_NDK_PERFORMANCE_COUNTERS, *PNDIS_NDK_PERFORMANCE_COUNTERS;

typedef struct _NDIS_NDK_STATISTICS_INFO {
    NDIS_OBJECT_HEADER Header;
    ULONG Flags;
    NDIS_NDK_PERFORMANCE_COUNTERS CounterSet;
} NDIS_NDK_STATISTICS_INFO;

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_NDKPI_H */
