/*++

Module Name:

    commands.c

Abstract:

    What each command does on nvmeof-target's controller: Fabrics Connect and Property Get/Set; the admin
    commands a Linux host uses (Identify controller, namespace, active namespace list and namespace descriptors;
    Set/Get Features; Get Log Page; Keep Alive; Asynchronous Event Requests, held); Read, Write and Flush on the
    RAM namespace. connection.c moves the data; here only its place and meaning are decided.

Environment:

    Kernel mode (softndk kernel layer), PASSIVE_LEVEL, in a connection's work item.

--*/

#include "nvmeof_target.h"

static VOID NtPadded(PUCHAR Field, ULONG Size, PCSTR Text) {
    ULONG i, n = (ULONG)strlen(Text);
    for (i = 0; i < Size; ++i) Field[i] = i < n ? (UCHAR)Text[i] : ' ';
}

static VOID NtPut16(PUCHAR Data, ULONG Offset, USHORT Value) {
    RtlCopyMemory(Data + Offset, &Value, sizeof(Value));
}

static VOID NtPut32(PUCHAR Data, ULONG Offset, ULONG Value) {
    RtlCopyMemory(Data + Offset, &Value, sizeof(Value));
}

static VOID NtPut64(PUCHAR Data, ULONG Offset, ULONG64 Value) {
    RtlCopyMemory(Data + Offset, &Value, sizeof(Value));
}

static ULONG NtBlockShift(void) {
    ULONG shift = 0;
    while ((1u << shift) < g_Nt.BlockSize) ++shift;
    return shift;
}

/* CAP: 128 entries per queue (MQES 0-based), contiguous queues, 5 s to ready, the NVM command set, 4 KiB pages. */
static ULONG64 NtCapabilities(void) {
    return (ULONG64)(NT_MAX_DEPTH - 1) | (1ull << 16) | (10ull << 24) | (1ull << 37);
}

USHORT NtPrepare(PNT_CONNECTION Connection, const NVME_COMMAND* Command, ULONG Length, BOOLEAN* FromHost,
                 NT_DATA_PLACE* Place, ULONG64* RamOffset) {
    UCHAR fctype = (UCHAR)(Command->NamespaceId & 0xFF);
    *FromHost = FALSE;
    *Place = NtDataNone;
    *RamOffset = 0;
    if (Command->Opcode == NVME_FABRICS) {
        if (fctype == NVMF_CONNECT) {
            if (Length != sizeof(NVMF_CONNECT_DATA)) return NT_SC_INVALID_FIELD;
            *FromHost = TRUE;
            *Place = NtDataStaging;
        }
        return NT_SC_SUCCESS;
    }
    if (Connection->Controller == NULL) return NT_SC_SEQUENCE_ERROR; /* nothing before Connect */
    if (Connection->QueueId == 0) {
        if (Command->Opcode == NVME_ADMIN_IDENTIFY || Command->Opcode == NVME_ADMIN_GET_LOG_PAGE) {
            if (Length == 0 || Length > NT_STAGING) return NT_SC_INVALID_FIELD;
            *Place = NtDataStaging;
        }
        return NT_SC_SUCCESS;
    }
    if (Command->Opcode == NVME_IO_READ || Command->Opcode == NVME_IO_WRITE) {
        ULONG64 block = Command->Cdw10 | ((ULONG64)Command->Cdw11 << 32);
        ULONG blocks = (Command->Cdw12 & 0xFFFF) + 1;
        ULONG64 total = g_Nt.NamespaceBytes >> NtBlockShift();
        if (Command->NamespaceId != 1) return NT_SC_INVALID_NAMESPACE;
        if (block >= total || blocks > total - block) return NT_SC_LBA_OUT_OF_RANGE;
        if (((ULONG64)blocks << NtBlockShift()) > NT_MAX_TRANSFER) return NT_SC_INVALID_FIELD;
        if (Length < ((ULONG64)blocks << NtBlockShift())) return NT_SC_DATA_TRANSFER_ERROR; /* SGL too short */
        *FromHost = Command->Opcode == NVME_IO_WRITE;
        *Place = NtDataRam;
        *RamOffset = block << NtBlockShift();
    }
    return NT_SC_SUCCESS;
}

/* ---- Fabrics ---------------------------------------------------------------------------------------------- */

static USHORT NtConnect(PNT_CONNECTION Connection, const NVME_COMMAND* Command, PUCHAR Staging, ULONG64* Result) {
    const NVMF_CONNECT_FIELDS* fields = (const NVMF_CONNECT_FIELDS*)&Command->Cdw10;
    NVMF_CONNECT_DATA* data = (NVMF_CONNECT_DATA*)Staging;
    KLOCK_QUEUE_HANDLE lock;
    ULONG i;
    USHORT status = NT_SC_SUCCESS;
    data->SubsystemNqn[sizeof(data->SubsystemNqn) - 1] = 0;
    data->HostNqn[sizeof(data->HostNqn) - 1] = 0;
    if (Connection->Controller != NULL) return NT_SC_SEQUENCE_ERROR; /* this queue is connected already */
    if (fields->RecordFormat != 0) return NT_SC_CONNECT_INCOMPATIBLE_FORMAT;
    if (fields->QueueId != Connection->QueueId || fields->SubmissionQueueSize + 1u > Connection->Depth) {
        *Result = fields->QueueId != Connection->QueueId ? 0x42 : 0x44; /* IATTR 0, IPO: the field at fault */
        return NT_SC_CONNECT_INVALID_PARAMETERS;
    }
    if (strcmp(data->SubsystemNqn, g_Nt.SubsystemNqn) != 0) {
        NtLog("nvmeof-target: Connect for subsystem \"%s\", this one is \"%s\"\n", data->SubsystemNqn,
              g_Nt.SubsystemNqn);
        *Result = (1ull << 16) | 256; /* IATTR 1: in the data; IPO 256: SUBNQN */
        return NT_SC_CONNECT_INVALID_PARAMETERS;
    }
    KeAcquireInStackQueuedSpinLock(&g_Nt.Lock, &lock);
    if (Connection->QueueId == 0) {
        for (i = 0; i < NT_MAX_CONTROLLERS && g_Nt.Controllers[i].InUse; ++i) {
        }
        if (data->ControllerId != 0xFFFF) {
            status = NT_SC_CONNECT_INVALID_PARAMETERS;
            *Result = (1ull << 16) | 16; /* CNTLID: only the dynamic model (0xFFFF) */
        } else if (i == NT_MAX_CONTROLLERS) {
            status = NT_SC_CONNECT_CONTROLLER_BUSY;
        } else {
            NT_CONTROLLER* controller = &g_Nt.Controllers[i];
            RtlZeroMemory(controller, sizeof(*controller));
            controller->InUse = TRUE;
            controller->Id = (USHORT)(i + 1);
            controller->KeepAliveMs = fields->KeepAliveTimeoutMs;
            controller->IoQueues = g_Nt.MaxIoQueues; /* until Set Features Number of Queues says fewer */
            controller->Connections = 1;
            RtlStringCbCopyA(controller->HostNqn, sizeof(controller->HostNqn), data->HostNqn);
            Connection->Controller = controller;
        }
    } else {
        NT_CONTROLLER* controller = NULL;
        for (i = 0; i < NT_MAX_CONTROLLERS; ++i)
            if (g_Nt.Controllers[i].InUse && g_Nt.Controllers[i].Id == data->ControllerId)
                controller = &g_Nt.Controllers[i];
        if (controller == NULL || controller->Lost || strcmp(controller->HostNqn, data->HostNqn) != 0) {
            status = NT_SC_CONNECT_INVALID_PARAMETERS;
            *Result = (1ull << 16) | 16;
        } else if ((controller->Status & NVME_CSTS_READY) == 0 || Connection->QueueId > controller->IoQueues) {
            status = NT_SC_CONNECT_INVALID_PARAMETERS;
            *Result = 0x42; /* QID */
        } else {
            ++controller->Connections;
            Connection->Controller = controller;
        }
    }
    KeReleaseInStackQueuedSpinLock(&lock);
    if (status == NT_SC_SUCCESS) {
        *Result = Connection->Controller->Id;
        NtLog("nvmeof-target: queue %u of controller %u connected (depth %u) for %s\n", Connection->QueueId,
              Connection->Controller->Id, Connection->Depth, data->HostNqn);
    }
    return status;
}

VOID NtReleaseController(NT_CONTROLLER* Controller) {
    KLOCK_QUEUE_HANDLE lock;
    KeAcquireInStackQueuedSpinLock(&g_Nt.Lock, &lock);
    if (--Controller->Connections == 0) Controller->InUse = FALSE;
    KeReleaseInStackQueuedSpinLock(&lock);
}

static USHORT NtProperty(PNT_CONNECTION Connection, const NVME_COMMAND* Command, ULONG64* Result) {
    const NVMF_PROPERTY_FIELDS* fields = (const NVMF_PROPERTY_FIELDS*)&Command->Cdw10;
    NT_CONTROLLER* controller = Connection->Controller;
    BOOLEAN set = (Command->NamespaceId & 0xFF) == NVMF_PROPERTY_SET, wide = (fields->Attributes & 7) == 1;
    if (controller == NULL || Connection->QueueId != 0) return NT_SC_SEQUENCE_ERROR;
    if (fields->Offset == NVME_PROPERTY_CAP && !set && wide) {
        *Result = NtCapabilities();
    } else if (fields->Offset == NVME_PROPERTY_VS && !set && !wide) {
        *Result = 0x00010300; /* NVMe 1.3 */
    } else if (fields->Offset == NVME_PROPERTY_CSTS && !set && !wide) {
        *Result = controller->Status;
    } else if (fields->Offset == NVME_PROPERTY_CC && !wide) {
        if (!set) {
            *Result = controller->Configuration;
            return NT_SC_SUCCESS;
        }
        controller->Configuration = (ULONG)fields->Value;
        if (controller->Configuration & NVME_CC_ENABLE)
            controller->Status |= NVME_CSTS_READY;
        else
            controller->Status &= ~(NVME_CSTS_READY | NVME_CSTS_SHUTDOWN_MASK);
        if (controller->Configuration & (3u << 14)) /* a shutdown: RAM has nothing to write back */
            controller->Status = (controller->Status & ~NVME_CSTS_SHUTDOWN_MASK) | NVME_CSTS_SHUTDOWN_COMPLETE;
        NtLog("nvmeof-target: controller %u: CC 0x%08X, CSTS 0x%08X\n", controller->Id, controller->Configuration,
              controller->Status);
    } else {
        return NT_SC_INVALID_FIELD; /* unknown property, or the wrong size for it */
    }
    return NT_SC_SUCCESS;
}

/* ---- admin -------------------------------------------------------------------------------------------------- */

static USHORT NtIdentify(PNT_CONNECTION Connection, const NVME_COMMAND* Command, PUCHAR Data) {
    ULONG cns = Command->Cdw10 & 0xFF;
    RtlZeroMemory(Data, NVME_IDENTIFY_SIZE);
    if (cns == NVME_CNS_CONTROLLER) {
        NtPadded(Data + NVME_ID_CTRL_SERIAL, 20, "SOFTNDK0001");
        NtPadded(Data + NVME_ID_CTRL_MODEL, 40, "softndk NVMe-oF RAM target");
        NtPadded(Data + NVME_ID_CTRL_FIRMWARE, 8, "1.0");
        Data[72] = 6;                /* RAB */
        Data[NVME_ID_CTRL_MDTS] = 5; /* 2^5 4 KiB pages: 128 KiB */
        NtPut16(Data, NVME_ID_CTRL_CNTLID, Connection->Controller->Id);
        NtPut32(Data, NVME_ID_CTRL_VERSION, 0x00010300);
        NtPut32(Data, 92, 1u << 8);   /* OAES: namespace attribute notices, so a host keeps Async Event Requests here */
        Data[258] = 3;                /* ACL */
        Data[259] = NT_AER_LIMIT - 1; /* AERL */
        NtPut16(Data, NVME_ID_CTRL_KAS, 10); /* keep-alive granularity: 1 s */
        Data[NVME_ID_CTRL_SQES] = 0x66;
        Data[NVME_ID_CTRL_CQES] = 0x44;
        NtPut16(Data, NVME_ID_CTRL_MAXCMD, NT_MAX_DEPTH);
        NtPut32(Data, NVME_ID_CTRL_NN, 1);
        Data[525] = 1;                                /* VWC: Flush is meaningful */
        NtPut32(Data, NVME_ID_CTRL_SGLS, 0x00100005); /* SGLs, keyed data blocks, offsets in the capsule */
        RtlCopyMemory(Data + NVME_ID_CTRL_SUBNQN, g_Nt.SubsystemNqn, strlen(g_Nt.SubsystemNqn));
        NtPut32(Data, NVME_ID_CTRL_IOCCSZ, (ULONG)NT_CAPSULE_SLOT / 16);
        NtPut32(Data, NVME_ID_CTRL_IORCSZ, sizeof(NVME_COMPLETION) / 16);
        Data[NVME_ID_CTRL_MSDBD] = 1;
    } else if (cns == NVME_CNS_NAMESPACE) {
        ULONG64 blocks = g_Nt.NamespaceBytes >> NtBlockShift();
        if (Command->NamespaceId != 1) return NT_SC_INVALID_NAMESPACE;
        NtPut64(Data, NVME_ID_NS_SIZE, blocks);
        NtPut64(Data, NVME_ID_NS_CAPACITY, blocks);
        NtPut64(Data, NVME_ID_NS_UTILIZATION, blocks);
        NtPut32(Data, NVME_ID_NS_LBAF, NtBlockShift() << 16);
    } else if (cns == NVME_CNS_ACTIVE_NAMESPACES) {
        if (Command->NamespaceId < 1) NtPut32(Data, 0, 1); /* the namespaces above NSID: only 1 */
    } else if (cns == NVME_CNS_NAMESPACE_DESCRIPTORS) {
        ULONG i;
        if (Command->NamespaceId != 1) return NT_SC_INVALID_NAMESPACE;
        Data[0] = 3;  /* NIDT: UUID */
        Data[1] = 16; /* NIDL */
        for (i = 0; i < 16; ++i) Data[4 + i] = (UCHAR)(0xA0 + i);
        Data[4 + 6] = 0x40 | (Data[4 + 6] & 0x0F); /* version 4 */
        Data[4 + 8] = 0x80 | (Data[4 + 8] & 0x3F);
    } else {
        return NT_SC_INVALID_FIELD;
    }
    return NT_SC_SUCCESS;
}

static USHORT NtFeatures(PNT_CONNECTION Connection, const NVME_COMMAND* Command, ULONG64* Result) {
    NT_CONTROLLER* controller = Connection->Controller;
    BOOLEAN set = Command->Opcode == NVME_ADMIN_SET_FEATURES;
    ULONG fid = Command->Cdw10 & 0xFF;
    switch (fid) {
        case NVME_FEATURE_NUMBER_OF_QUEUES:
            if (set) {
                ULONG asked = (Command->Cdw11 & 0xFFFF) + 1;
                if ((Command->Cdw11 & 0xFFFF) == 0xFFFF) return NT_SC_INVALID_FIELD;
                controller->IoQueues = asked < g_Nt.MaxIoQueues ? asked : g_Nt.MaxIoQueues;
            }
            *Result = ((ULONG64)(controller->IoQueues - 1) << 16) | (controller->IoQueues - 1);
            if (controller->IoQueues == 0) *Result = 0;
            return NT_SC_SUCCESS;
        case NVME_FEATURE_ASYNC_EVENT_CONFIG:
            if (set) controller->AsyncEventConfig = Command->Cdw11;
            *Result = controller->AsyncEventConfig;
            return NT_SC_SUCCESS;
        case NVME_FEATURE_KEEP_ALIVE_TIMER:
            if (set) controller->KeepAliveMs = Command->Cdw11;
            *Result = controller->KeepAliveMs;
            return NT_SC_SUCCESS;
        case 0x01: /* arbitration */
        case 0x02: /* power management */
        case 0x04: /* temperature threshold */
        case 0x06: /* volatile write cache: always on */
        case 0x08: /* interrupt coalescing: no interrupts here */
            *Result = fid == 0x06 ? 1 : 0;
            return NT_SC_SUCCESS;
        default:
            return NT_SC_INVALID_FIELD;
    }
}

USHORT NtExecute(PNT_CONNECTION Connection, const NVME_COMMAND* Command, PUCHAR Staging, ULONG Length, ULONG64* Result,
                 BOOLEAN* Hold) {
    *Result = 0;
    *Hold = FALSE;
    if (Command->Opcode == NVME_FABRICS) {
        UCHAR fctype = (UCHAR)(Command->NamespaceId & 0xFF);
        if (fctype == NVMF_CONNECT) return NtConnect(Connection, Command, Staging, Result);
        if (fctype == NVMF_PROPERTY_GET || fctype == NVMF_PROPERTY_SET) return NtProperty(Connection, Command, Result);
        return NT_SC_INVALID_OPCODE;
    }
    if (Connection->QueueId != 0) {
        /* Read and Write moved their data already (connection.c); Flush: RAM is always up to date */
        if (Command->Opcode == NVME_IO_READ || Command->Opcode == NVME_IO_WRITE) return NT_SC_SUCCESS;
        if (Command->Opcode == NVME_IO_FLUSH)
            return Command->NamespaceId == 1 || Command->NamespaceId == 0xFFFFFFFF ? NT_SC_SUCCESS
                                                                                   : NT_SC_INVALID_NAMESPACE;
        return NT_SC_INVALID_OPCODE;
    }
    switch (Command->Opcode) {
        case NVME_ADMIN_IDENTIFY:
            if (Length < NVME_IDENTIFY_SIZE) return NT_SC_INVALID_FIELD;
            return NtIdentify(Connection, Command, Staging);
        case NVME_ADMIN_GET_LOG_PAGE: {
            ULONG lid = Command->Cdw10 & 0xFF;
            if (lid < 0x01 || lid > 0x05) return NT_SC_INVALID_FIELD;
            RtlZeroMemory(Staging, Length); /* no errors, no health events, one firmware slot, no changes */
            return NT_SC_SUCCESS;
        }
        case NVME_ADMIN_SET_FEATURES:
        case NVME_ADMIN_GET_FEATURES:
            return NtFeatures(Connection, Command, Result);
        case NVME_ADMIN_KEEP_ALIVE:
            return NT_SC_SUCCESS;
        case NVME_ADMIN_ASYNC_EVENT:
            if (Connection->HeldEvents >= NT_AER_LIMIT) return NT_SC_AER_LIMIT;
            ++Connection->HeldEvents;
            *Hold = TRUE; /* answered when there is an event: never, here; flushed at disconnect */
            return NT_SC_SUCCESS;
        case 0x08: /* Abort: nothing is ever stuck here, so nothing is aborted */
            *Result = 1;
            return NT_SC_SUCCESS;
        default:
            return NT_SC_INVALID_OPCODE;
    }
}
