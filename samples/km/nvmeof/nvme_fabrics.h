/* NVMe over Fabrics on RDMA, as it goes on the wire: the 64-byte command capsule (submission queue entry), the
 * 16-byte response capsule (completion queue entry), the SGL descriptors, the Fabrics commands (Connect, Property
 * Get/Set), and the RDMA CM private data of the RDMA transport binding. Shared by the samples' NVMe-oF host and
 * target. References: NVM Express Base 2.0 (§4.1 SQE, §4.2 CQE, §4.3 SGL, §5 admin commands), NVMe over Fabrics
 * 1.1 (§3.3 Connect, §3.4/3.5 Property Get/Set) and the RDMA transport binding (NVMe-oF 1.1 §7.3: CM private data,
 * keyed SGLs, Send with Invalidate). All fields are little-endian, as is every platform softndk runs on. */
#pragma once

#include <ntddk.h>

#pragma pack(push, 1)

/* A keyed SGL data block descriptor (§4.3.2.5): the peer reaches Address..+Length with RDMA under Key. */
typedef struct _NVME_KEYED_SGL {
    ULONG64 Address;
    UCHAR Length[3]; /* 24 bits */
    ULONG Key;
    UCHAR Type; /* NVME_SGL_KEYED_ADDRESS or NVME_SGL_KEYED_INVALIDATE */
} NVME_KEYED_SGL;

/* An SGL data block descriptor with an offset into the capsule (in-capsule data, §4.3.2.1 with subtype offset). */
typedef struct _NVME_INCAPSULE_SGL {
    ULONG64 Offset;
    ULONG Length;
    UCHAR Reserved[3];
    UCHAR Type; /* NVME_SGL_INCAPSULE */
} NVME_INCAPSULE_SGL;

#define NVME_SGL_KEYED_ADDRESS 0x40    /* keyed data block, subtype address */
#define NVME_SGL_KEYED_INVALIDATE 0x4F /* keyed data block, subtype "invalidate the key" (Send with Invalidate) */
#define NVME_SGL_INCAPSULE 0x01        /* data block, subtype offset */
#define NVME_FLAG_SGL 0x40             /* PSDT 01b: the data pointer is an SGL (every Fabrics command) */

/* The command capsule's submission queue entry (§4.1). Fabrics commands reuse bytes 4..7 as their type. */
typedef struct _NVME_COMMAND {
    UCHAR Opcode;
    UCHAR Flags;
    USHORT CommandId;
    ULONG NamespaceId; /* Fabrics commands: byte 4 is the Fabrics command type */
    ULONG Cdw2, Cdw3;
    ULONG64 MetadataPointer;
    union {
        NVME_KEYED_SGL Keyed;
        NVME_INCAPSULE_SGL InCapsule;
        UCHAR Bytes[16];
    } Data;
    ULONG Cdw10, Cdw11, Cdw12, Cdw13, Cdw14, Cdw15;
} NVME_COMMAND;

/* The Fabrics Connect command's specific fields (NVMe-oF §3.3), over bytes 40..63 of the capsule. */
typedef struct _NVMF_CONNECT_FIELDS {
    USHORT RecordFormat; /* 0 */
    USHORT QueueId;
    USHORT SubmissionQueueSize; /* 0-based */
    UCHAR Attributes;
    UCHAR Reserved;
    ULONG KeepAliveTimeoutMs; /* admin queue only */
    UCHAR Reserved2[12];
} NVMF_CONNECT_FIELDS;

/* Property Get/Set (NVMe-oF §3.4, §3.5), over bytes 40..63. */
typedef struct _NVMF_PROPERTY_FIELDS {
    UCHAR Attributes; /* 0: 4 bytes, 1: 8 bytes */
    UCHAR Reserved[3];
    ULONG Offset;
    ULONG64 Value; /* Set only */
    UCHAR Reserved2[8];
} NVMF_PROPERTY_FIELDS;

/* The Connect command's 1024 bytes of data (NVMe-oF §3.3, Figure 20). */
typedef struct _NVMF_CONNECT_DATA {
    UCHAR HostId[16];
    USHORT ControllerId; /* 0xFFFF on the admin queue: the target picks one */
    UCHAR Reserved[238];
    CHAR SubsystemNqn[256];
    CHAR HostNqn[256];
    UCHAR Reserved2[256];
} NVMF_CONNECT_DATA;

/* The response capsule's completion queue entry (§4.2). */
typedef struct _NVME_COMPLETION {
    ULONG64 Result; /* command specific: Connect's controller ID, Property Get's value, Set Features' answer */
    USHORT SqHead;
    USHORT SqId;
    USHORT CommandId;
    USHORT Status; /* bit 0 phase; 8:1 status code; 11:9 status code type; 15 do not retry */
} NVME_COMPLETION;

/* RDMA CM private data of the RDMA transport binding (NVMe-oF §7.3.1). */
typedef struct _NVME_RDMA_CM_REQUEST {
    USHORT RecordFormat; /* 0 */
    USHORT QueueId;
    USHORT HostReceiveQueueSize;    /* response capsules the host can take: the queue depth */
    USHORT HostSubmissionQueueSize; /* 0-based */
    USHORT ControllerId;            /* I/O queues: the admin queue's controller */
    UCHAR Reserved[22];
} NVME_RDMA_CM_REQUEST;

typedef struct _NVME_RDMA_CM_ACCEPT {
    USHORT RecordFormat;
    USHORT ControllerReceiveQueueSize; /* command capsules the target can take */
    UCHAR Reserved[28];
} NVME_RDMA_CM_ACCEPT;

typedef struct _NVME_RDMA_CM_REJECT {
    USHORT RecordFormat;
    USHORT Status;
} NVME_RDMA_CM_REJECT;

#pragma pack(pop)

_Static_assert(sizeof(NVME_COMMAND) == 64, "a submission queue entry is 64 bytes");
_Static_assert(sizeof(NVMF_CONNECT_FIELDS) == 24 && sizeof(NVMF_PROPERTY_FIELDS) == 24, "bytes 40..63");
_Static_assert(sizeof(NVMF_CONNECT_DATA) == 1024, "the Connect data is 1024 bytes");
_Static_assert(sizeof(NVME_COMPLETION) == 16, "a completion queue entry is 16 bytes");
_Static_assert(sizeof(NVME_RDMA_CM_REQUEST) == 32 && sizeof(NVME_RDMA_CM_ACCEPT) == 32, "CM private data");

/* Opcodes: admin (§5), NVM I/O (NVM Command Set §3), Fabrics (NVMe-oF §3). */
#define NVME_ADMIN_GET_LOG_PAGE 0x02
#define NVME_ADMIN_IDENTIFY 0x06
#define NVME_ADMIN_SET_FEATURES 0x09
#define NVME_ADMIN_GET_FEATURES 0x0A
#define NVME_ADMIN_ASYNC_EVENT 0x0C
#define NVME_ADMIN_KEEP_ALIVE 0x18
#define NVME_IO_FLUSH 0x00
#define NVME_IO_WRITE 0x01
#define NVME_IO_READ 0x02
#define NVME_FABRICS 0x7F
#define NVMF_PROPERTY_SET 0x00
#define NVMF_CONNECT 0x01
#define NVMF_PROPERTY_GET 0x04

/* Identify CNS values (§5.17.1) and the features used (§5.27.1). */
#define NVME_CNS_NAMESPACE 0x00
#define NVME_CNS_CONTROLLER 0x01
#define NVME_CNS_ACTIVE_NAMESPACES 0x02
#define NVME_CNS_NAMESPACE_DESCRIPTORS 0x03
#define NVME_FEATURE_NUMBER_OF_QUEUES 0x07
#define NVME_FEATURE_ASYNC_EVENT_CONFIG 0x0B
#define NVME_FEATURE_KEEP_ALIVE_TIMER 0x0F

/* Controller properties (§3.1.3): offsets and the bits used. */
#define NVME_PROPERTY_CAP 0x00  /* 8 bytes */
#define NVME_PROPERTY_VS 0x08   /* 4 bytes */
#define NVME_PROPERTY_CC 0x14   /* 4 bytes */
#define NVME_PROPERTY_CSTS 0x1C /* 4 bytes */
#define NVME_CC_ENABLE 0x1u
#define NVME_CC_SHUTDOWN_NORMAL (1u << 14)
#define NVME_CC_QUEUE_ENTRY_SIZES ((6u << 16) | (4u << 20)) /* IOSQES 2^6 = 64, IOCQES 2^4 = 16 */
#define NVME_CSTS_READY 0x1u
#define NVME_CSTS_FATAL 0x2u
#define NVME_CSTS_SHUTDOWN_MASK (3u << 2)
#define NVME_CSTS_SHUTDOWN_COMPLETE (2u << 2)

/* Identify Controller (§5.17.2.1) and Namespace (NVM Command Set §4.1.5.1) offsets this code reads or writes. */
#define NVME_ID_CTRL_SERIAL 4
#define NVME_ID_CTRL_MODEL 24
#define NVME_ID_CTRL_FIRMWARE 64
#define NVME_ID_CTRL_MDTS 77
#define NVME_ID_CTRL_CNTLID 78
#define NVME_ID_CTRL_VERSION 80
#define NVME_ID_CTRL_KAS 320
#define NVME_ID_CTRL_SQES 512
#define NVME_ID_CTRL_CQES 513
#define NVME_ID_CTRL_MAXCMD 514
#define NVME_ID_CTRL_NN 516
#define NVME_ID_CTRL_SGLS 536
#define NVME_ID_CTRL_SUBNQN 768
#define NVME_ID_CTRL_IOCCSZ 1792
#define NVME_ID_CTRL_IORCSZ 1796
#define NVME_ID_CTRL_ICDOFF 1800
#define NVME_ID_CTRL_MSDBD 1803
#define NVME_ID_NS_SIZE 0
#define NVME_ID_NS_CAPACITY 8
#define NVME_ID_NS_UTILIZATION 16
#define NVME_ID_NS_NLBAF 25
#define NVME_ID_NS_FLBAS 26
#define NVME_ID_NS_LBAF 128 /* 4 bytes each; bits 23:16 are log2 of the block size */
#define NVME_IDENTIFY_SIZE 4096

/* Status: the 15 bits above the phase bit, split. */
#define NVME_STATUS_CODE(status) (((status) >> 1) & 0xFF)
#define NVME_STATUS_TYPE(status) (((status) >> 9) & 0x7)
#define NVME_STATUS_OK(status) ((((status) >> 1) & 0x7FF) == 0)

static __inline VOID NvmeSetKeyedSgl(NVME_KEYED_SGL* Sgl, ULONG64 Address, ULONG Length, ULONG Key,
                                     BOOLEAN Invalidate) {
    Sgl->Address = Address;
    Sgl->Length[0] = (UCHAR)Length;
    Sgl->Length[1] = (UCHAR)(Length >> 8);
    Sgl->Length[2] = (UCHAR)(Length >> 16);
    Sgl->Key = Key;
    Sgl->Type = Invalidate ? NVME_SGL_KEYED_INVALIDATE : NVME_SGL_KEYED_ADDRESS;
}

static __inline ULONG NvmeKeyedSglLength(const NVME_KEYED_SGL* Sgl) {
    return Sgl->Length[0] | ((ULONG)Sgl->Length[1] << 8) | ((ULONG)Sgl->Length[2] << 16);
}

static __inline ULONG NvmeRead32(const UCHAR* Data, ULONG Offset) {
    ULONG value;
    RtlCopyMemory(&value, Data + Offset, sizeof(value));
    return value;
}

static __inline ULONG64 NvmeRead64(const UCHAR* Data, ULONG Offset) {
    ULONG64 value;
    RtlCopyMemory(&value, Data + Offset, sizeof(value));
    return value;
}

/* The test pattern both samples write and check: a byte of the namespace at Offset, in pass Pass. */
static __inline UCHAR NvmePattern(ULONG64 Offset, ULONG Pass) {
    return (UCHAR)((Offset * 31) ^ (Offset >> 12) ^ (Pass * 0x5B) ^ 0xA5);
}
