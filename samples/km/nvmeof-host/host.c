/*++

Module Name:

    host.c

Abstract:

    nvmeof-host: an NVMe over Fabrics RDMA host written as a Windows kernel driver is. DriverEntry opens the
    adapter that holds LocalAddress through WskOpenNdkAdapter and queues a work item that:

      admin queue    connect (CM private data: queue 0), Fabrics Connect (its 1024-byte data by keyed SGL),
                     Property Get CAP (8 bytes) and VS, Property Set CC.EN, wait for CSTS.RDY, Identify Controller
                     and Namespace, Set Features Number of Queues; then Keep Alive on a timer (a KTIMER's DPC wakes
                     a work item that owns the admin queue from then on)
      I/O queues     IoQueues of them, QueueDepth deep, each with its own Fabrics Connect
      test           pass 1: 4 KiB writes (in the capsule where the target offers in-capsule data), 128 KiB reads,
                     every byte checked; pass 2: 128 KiB writes, 4 KiB reads, checked; a Flush per queue. Every
                     keyed SGL is a fast registration of its own, invalidated by the target (Send with
                     Invalidate) on odd queues and by us on even ones (Invalidate=both; or all remote, all local)
      teardown       QueueDepth - 1 reads posted on the last I/O queue and the queue disconnected under them; CC
                     shutdown, CSTS.SHST; every connection closed; DriverUnload frees the rest

    Each step is logged with its NTSTATUS in words. Parameters (RegistryPath\Parameters, softndk-kmhost
    --parameter): Address (the target, 127.0.0.1), LocalAddress (default Address), Port (4420), Nqn (the
    subsystem), IoQueues (2, at most 4), QueueDepth (32, at most 64), TestBytes (4 MiB; at most the namespace),
    Invalidate (both, remote or local), Benchmark (0; 1: timed runs on I/O queue 1 instead of the checked passes,
    which need QueueDepth 33 for their depth-32 runs) and BenchSeconds (3, each run).

Environment:

    Kernel mode (softndk kernel layer).

--*/

#include "nvmeof_host.h"

NH_DRIVER g_Nh;

#define NH_HOST_NQN "nqn.2014-08.org.nvmexpress:uuid:5e7f0a11-50f7-4e0d-9c1d-000000000001"

VOID NhStep(PCSTR Step, NTSTATUS Status) {
    NhLog("nvmeof-host: %s: 0x%08X (%s)\n", Step, Status, NhStatusText(Status));
}

/* ---- admin commands --------------------------------------------------------------------------------------- */

static NTSTATUS NhFabricsConnect(PNH_QUEUE Queue) {
    NVME_COMMAND command;
    NVMF_CONNECT_FIELDS* fields = (NVMF_CONNECT_FIELDS*)&command.Cdw10;
    NVMF_CONNECT_DATA* data;
    NVME_COMPLETION response;
    LONG slot = NhNextFreeSlot(Queue);
    NTSTATUS status;
    if (slot < 0) return STATUS_DEVICE_BUSY;
    data = (NVMF_CONNECT_DATA*)NhSlotData(Queue, (ULONG)slot);
    RtlZeroMemory(data, sizeof(*data));
    RtlCopyMemory(data->HostId, g_Nh.HostId, sizeof(data->HostId));
    data->ControllerId = Queue->Id == 0 ? 0xFFFF : g_Nh.ControllerId;
    RtlCopyMemory(data->SubsystemNqn, g_Nh.SubsystemNqn, strlen(g_Nh.SubsystemNqn));
    RtlCopyMemory(data->HostNqn, NH_HOST_NQN, sizeof(NH_HOST_NQN) - 1);
    RtlZeroMemory(&command, sizeof(command));
    command.Opcode = NVME_FABRICS;
    command.NamespaceId = NVMF_CONNECT; /* byte 4: the Fabrics command type */
    fields->QueueId = Queue->Id;
    fields->SubmissionQueueSize = (USHORT)(Queue->Depth - 1);
    fields->KeepAliveTimeoutMs = Queue->Id == 0 ? NH_KEEP_ALIVE_MS : 0;
    status = NhExecute(Queue, &command, NhToTarget, sizeof(*data), &response);
    if (!NT_SUCCESS(status)) return status;
    if (Queue->Id == 0) g_Nh.ControllerId = (USHORT)response.Result;
    return STATUS_SUCCESS;
}

static NTSTATUS NhProperty(BOOLEAN Set, ULONG Offset, BOOLEAN Wide, ULONG64* Value) {
    NVME_COMMAND command;
    NVMF_PROPERTY_FIELDS* fields = (NVMF_PROPERTY_FIELDS*)&command.Cdw10;
    NVME_COMPLETION response;
    NTSTATUS status;
    RtlZeroMemory(&command, sizeof(command));
    command.Opcode = NVME_FABRICS;
    command.NamespaceId = Set ? NVMF_PROPERTY_SET : NVMF_PROPERTY_GET;
    fields->Attributes = Wide ? 1 : 0; /* 64-bit properties are read whole: nvmet refuses 4-byte halves */
    fields->Offset = Offset;
    if (Set) fields->Value = *Value;
    status = NhExecute(&g_Nh.Admin, &command, NhNoData, 0, &response);
    if (NT_SUCCESS(status) && !Set) *Value = Wide ? response.Result : (ULONG)response.Result;
    return status;
}

static NTSTATUS NhIdentify(ULONG Cns, ULONG NamespaceId, PUCHAR Copy) {
    NVME_COMMAND command;
    NVME_COMPLETION response;
    LONG slot = NhNextFreeSlot(&g_Nh.Admin);
    NTSTATUS status;
    if (slot < 0) return STATUS_DEVICE_BUSY;
    RtlZeroMemory(&command, sizeof(command));
    command.Opcode = NVME_ADMIN_IDENTIFY;
    command.NamespaceId = NamespaceId;
    command.Cdw10 = Cns;
    status = NhExecute(&g_Nh.Admin, &command, NhFromTarget, NVME_IDENTIFY_SIZE, &response);
    if (NT_SUCCESS(status)) RtlCopyMemory(Copy, NhSlotData(&g_Nh.Admin, (ULONG)slot), NVME_IDENTIFY_SIZE);
    return status;
}

static VOID NhText(PCSTR Label, const UCHAR* Data, ULONG Length) {
    CHAR text[48];
    ULONG i, n = Length < sizeof(text) - 1 ? Length : sizeof(text) - 1;
    for (i = 0; i < n; ++i) text[i] = (Data[i] >= 0x20 && Data[i] < 0x7F) ? (CHAR)Data[i] : '?';
    while (n > 0 && text[n - 1] == ' ') --n;
    text[n] = 0;
    NhLog("nvmeof-host:   %s \"%s\"\n", Label, text);
}

/* Admin queue up to a ready controller that knows its namespace and has the I/O queues asked for. */
static NTSTATUS NhBringUp(void) {
    UCHAR* identify;
    ULONG64 value = 0;
    ULONG waited, timeoutMs, lbaFormat;
    NVME_COMMAND command;
    NVME_COMPLETION response;
    NTSTATUS status;
    PAGED_CODE();
    g_Nh.Admin.Id = 0;
    g_Nh.Admin.Depth = NH_ADMIN_DEPTH;
    status = NhConnectQueue(&g_Nh.Admin);
    NhStep("admin queue: RDMA connection", status);
    if (!NT_SUCCESS(status)) return status;
    status = NhFabricsConnect(&g_Nh.Admin);
    NhStep("admin queue: Fabrics Connect", status);
    if (!NT_SUCCESS(status)) return status;
    NhLog("nvmeof-host:   controller %u\n", g_Nh.ControllerId);
    status = NhProperty(FALSE, NVME_PROPERTY_CAP, TRUE, &g_Nh.Capabilities);
    NhStep("Property Get CAP (8 bytes)", status);
    if (!NT_SUCCESS(status)) return status;
    NhLog("nvmeof-host:   CAP 0x%016llX: up to %u entries per queue, ready within %u ms\n",
          (unsigned long long)g_Nh.Capabilities, (ULONG)(g_Nh.Capabilities & 0xFFFF) + 1,
          (ULONG)((g_Nh.Capabilities >> 24) & 0xFF) * 500);
    status = NhProperty(FALSE, NVME_PROPERTY_VS, FALSE, &value);
    NhStep("Property Get VS", status);
    if (!NT_SUCCESS(status)) return status;
    NhLog("nvmeof-host:   NVMe %u.%u\n", (ULONG)(value >> 16), (ULONG)(value >> 8) & 0xFF);
    value = NVME_CC_ENABLE | NVME_CC_QUEUE_ENTRY_SIZES;
    status = NhProperty(TRUE, NVME_PROPERTY_CC, FALSE, &value);
    NhStep("Property Set CC.EN", status);
    if (!NT_SUCCESS(status)) return status;
    timeoutMs = (ULONG)((g_Nh.Capabilities >> 24) & 0xFF) * 500 + 500;
    for (waited = 0;; waited += 50) {
        LARGE_INTEGER pause;
        status = NhProperty(FALSE, NVME_PROPERTY_CSTS, FALSE, &value);
        if (!NT_SUCCESS(status) || (value & (NVME_CSTS_READY | NVME_CSTS_FATAL)) != 0) break;
        if (waited >= timeoutMs) {
            status = STATUS_DEVICE_NOT_READY;
            break;
        }
        pause.QuadPart = -50 * 10000;
        KeDelayExecutionThread(KernelMode, FALSE, &pause);
    }
    if (NT_SUCCESS(status) && (value & NVME_CSTS_FATAL)) status = STATUS_DEVICE_NOT_READY;
    NhStep("wait for CSTS.RDY", status);
    if (!NT_SUCCESS(status)) return status;

    identify = (UCHAR*)ExAllocatePool2(POOL_FLAG_NON_PAGED, NVME_IDENTIFY_SIZE, NH_TAG);
    if (identify == NULL) return STATUS_INSUFFICIENT_RESOURCES;
    status = NhIdentify(NVME_CNS_CONTROLLER, 0, identify);
    NhStep("Identify Controller", status);
    if (NT_SUCCESS(status)) {
        ULONG ioccsz = NvmeRead32(identify, NVME_ID_CTRL_IOCCSZ);
        UCHAR mdts = identify[NVME_ID_CTRL_MDTS];
        NhText("model", identify + NVME_ID_CTRL_MODEL, 40);
        NhText("serial", identify + NVME_ID_CTRL_SERIAL, 20);
        NhText("firmware", identify + NVME_ID_CTRL_FIRMWARE, 8);
        /* in-capsule data: IOCCSZ counts 16-byte units of the whole capsule, the 64-byte command included */
        g_Nh.InCapsuleBytes = ioccsz * 16 > sizeof(NVME_COMMAND) ? ioccsz * 16 - sizeof(NVME_COMMAND) : 0;
        if (*(USHORT*)(identify + NVME_ID_CTRL_ICDOFF) != 0) g_Nh.InCapsuleBytes = 0; /* only offset 0 is used */
        g_Nh.MaxTransfer = NH_MAX_TRANSFER;
        if (mdts != 0 && mdts < 16 && (PAGE_SIZE << mdts) < g_Nh.MaxTransfer) g_Nh.MaxTransfer = PAGE_SIZE << mdts;
        NhLog("nvmeof-host:   %u namespaces, in-capsule data up to %u bytes, transfers up to %u bytes, SGLS 0x%08X\n",
              NvmeRead32(identify, NVME_ID_CTRL_NN), g_Nh.InCapsuleBytes, g_Nh.MaxTransfer,
              NvmeRead32(identify, NVME_ID_CTRL_SGLS));
        status = NhIdentify(NVME_CNS_NAMESPACE, 1, identify);
        NhStep("Identify Namespace 1", status);
    }
    if (NT_SUCCESS(status)) {
        ULONG shift;
        lbaFormat = identify[NVME_ID_NS_FLBAS] & 0xF;
        shift = (NvmeRead32(identify, NVME_ID_NS_LBAF + 4 * lbaFormat) >> 16) & 0xFF;
        g_Nh.Blocks = NvmeRead64(identify, NVME_ID_NS_SIZE);
        /* a block of 512 bytes to a page, in a format the namespace lists (NLBAF is 0-based) */
        if (lbaFormat > identify[NVME_ID_NS_NLBAF] || shift < 9 || shift > PAGE_SHIFT || g_Nh.Blocks == 0) {
            NhLog("nvmeof-host:   namespace 1: format %u of %u, block size 2^%u, %llu blocks: not usable here\n",
                  lbaFormat, identify[NVME_ID_NS_NLBAF] + 1u, shift, (unsigned long long)g_Nh.Blocks);
            status = NhProtocolError(__LINE__);
        } else {
            g_Nh.BlockSize = 1u << shift;
            NhLog("nvmeof-host:   namespace 1: %llu blocks of %u bytes\n", (unsigned long long)g_Nh.Blocks,
                  g_Nh.BlockSize);
        }
    }
    ExFreePoolWithTag(identify, NH_TAG);
    if (!NT_SUCCESS(status)) return status;

    RtlZeroMemory(&command, sizeof(command));
    command.Opcode = NVME_ADMIN_SET_FEATURES;
    command.Cdw10 = NVME_FEATURE_NUMBER_OF_QUEUES;
    command.Cdw11 = ((g_Nh.IoQueues - 1) << 16) | (g_Nh.IoQueues - 1);
    status = NhExecute(&g_Nh.Admin, &command, NhNoData, 0, &response);
    NhStep("Set Features: Number of Queues", status);
    if (!NT_SUCCESS(status)) return status;
    NhLog("nvmeof-host:   asked for %u I/O queues, the controller allows %u\n", g_Nh.IoQueues,
          (ULONG)(response.Result & 0xFFFF) + 1);
    if ((response.Result & 0xFFFF) + 1 < g_Nh.IoQueues) g_Nh.IoQueues = (ULONG)(response.Result & 0xFFFF) + 1;
    return STATUS_SUCCESS;
}

/* ---- keep-alive ------------------------------------------------------------------------------------------- */

VOID NhKeepAliveDpc(PKDPC Dpc, PVOID Context, PVOID Argument1, PVOID Argument2) {
    UNREFERENCED_PARAMETER(Dpc);
    UNREFERENCED_PARAMETER(Context);
    UNREFERENCED_PARAMETER(Argument1);
    UNREFERENCED_PARAMETER(Argument2);
    KeSetEvent(&g_Nh.KeepAliveDue, IO_NO_INCREMENT, FALSE); /* DISPATCH_LEVEL: the worker sends it */
}

static VOID NhKeepAliveWorker(PDEVICE_OBJECT Device, PVOID Context) {
    PVOID objects[3];
    UNREFERENCED_PARAMETER(Device);
    UNREFERENCED_PARAMETER(Context);
    objects[0] = &g_Nh.KeepAliveDue;
    objects[1] = &g_Nh.KeepAliveStop;
    objects[2] = &g_Nh.Stop;
    g_Nh.KeepAliveStatus = STATUS_SUCCESS;
    while (KeWaitForMultipleObjects(3, objects, WaitAny, Executive, KernelMode, FALSE, NULL, NULL) == STATUS_WAIT_0) {
        NVME_COMMAND command;
        NVME_COMPLETION response;
        NTSTATUS status;
        RtlZeroMemory(&command, sizeof(command));
        command.Opcode = NVME_ADMIN_KEEP_ALIVE;
        status = NhExecute(&g_Nh.Admin, &command, NhNoData, 0, &response);
        if (!NT_SUCCESS(status)) {
            NhStep("Keep Alive", status);
            g_Nh.KeepAliveStatus = status;
            break;
        }
        ++g_Nh.KeepAlivesSent;
    }
    KeSetEvent(&g_Nh.KeepAliveDone, IO_NO_INCREMENT, FALSE);
    ExReleaseRundownProtection(&g_Nh.Rundown);
}

/* Fails when DriverUnload has begun: then nothing is started. */
static NTSTATUS NhStartKeepAlive(void) {
    LARGE_INTEGER due;
    due.QuadPart = -(LONGLONG)(NH_KEEP_ALIVE_MS / 2) * 10000;
    if (!ExAcquireRundownProtection(&g_Nh.Rundown)) return STATUS_REQUEST_ABORTED;
    g_Nh.KeepAliveRunning = TRUE;
    KeSetTimerEx(&g_Nh.KeepAliveTimer, due, NH_KEEP_ALIVE_MS / 2, &g_Nh.KeepAliveDpc);
    IoQueueWorkItem(g_Nh.KeepAliveItem, NhKeepAliveWorker, DelayedWorkQueue, NULL);
    return STATUS_SUCCESS;
}

/* The admin queue is the worker's until it has stopped. */
static NTSTATUS NhStopKeepAlive(void) {
    KeCancelTimer(&g_Nh.KeepAliveTimer);
    KeSetEvent(&g_Nh.KeepAliveStop, IO_NO_INCREMENT, FALSE);
    KeWaitForSingleObject(&g_Nh.KeepAliveDone, Executive, KernelMode, FALSE, NULL);
    g_Nh.KeepAliveRunning = FALSE;
    NhLog("nvmeof-host: keep-alive stopped after %u Keep Alive commands: 0x%08X (%s)\n", g_Nh.KeepAlivesSent,
          g_Nh.KeepAliveStatus, NhStatusText(g_Nh.KeepAliveStatus));
    return g_Nh.KeepAliveStatus;
}

/* ---- the I/O test ----------------------------------------------------------------------------------------- */

/* One pass over the test range: Opcode in Unit-byte commands, command k on queue k % IoQueues, each queue kept
 * full. Reads check every byte against pass Pass's pattern. */
static NTSTATUS NhRunPass(UCHAR Opcode, ULONG Unit, ULONG Pass) {
    ULONG64 bytes = g_Nh.TestBytes;
    ULONG commands = (ULONG)((bytes + Unit - 1) / Unit), next[NH_MAX_IO_QUEUES], done = 0, q, mismatches = 0;
    NTSTATUS status = STATUS_SUCCESS;
    for (q = 0; q < g_Nh.IoQueues; ++q) next[q] = q;
    while (NT_SUCCESS(status) && done < commands) {
        for (q = 0; q < g_Nh.IoQueues && NT_SUCCESS(status); ++q) {
            PNH_QUEUE queue = &g_Nh.Io[q];
            LONG slot;
            while (next[q] < commands && (slot = NhNextFreeSlot(queue)) >= 0) {
                ULONG64 offset = (ULONG64)next[q] * Unit;
                ULONG length = (ULONG)(bytes - offset < Unit ? bytes - offset : Unit), i, taken;
                NVME_COMMAND command;
                PUCHAR data = NhSlotData(queue, (ULONG)slot);
                if (Opcode == NVME_IO_WRITE)
                    for (i = 0; i < length; ++i) data[i] = NvmePattern(offset + i, Pass);
                RtlZeroMemory(&command, sizeof(command));
                command.Opcode = Opcode;
                command.NamespaceId = 1;
                command.Cdw10 = (ULONG)(offset / g_Nh.BlockSize);
                command.Cdw11 = (ULONG)((offset / g_Nh.BlockSize) >> 32);
                command.Cdw12 = length / g_Nh.BlockSize - 1;
                status = NhSubmit(queue, &command, Opcode == NVME_IO_WRITE ? NhToTarget : NhFromTarget, length, offset,
                                  &taken);
                if (!NT_SUCCESS(status)) break;
                next[q] += g_Nh.IoQueues;
            }
            if (NT_SUCCESS(status) && queue->InFlight > 0) {
                ULONG finished;
                NH_COMMAND* slot;
                status = NhReap(queue, &finished, NH_WAIT_MS);
                if (!NT_SUCCESS(status)) break;
                slot = &queue->Commands[finished];
                if (!NVME_STATUS_OK(slot->Response.Status)) {
                    NhLog("nvmeof-host: queue %u: opcode 0x%02X at byte %llu: NVMe status type %u code 0x%02X\n",
                          queue->Id, Opcode, (unsigned long long)slot->Tag, NVME_STATUS_TYPE(slot->Response.Status),
                          NVME_STATUS_CODE(slot->Response.Status));
                    status = STATUS_DEVICE_PROTOCOL_ERROR;
                } else if (Opcode == NVME_IO_READ) {
                    PUCHAR data = NhSlotData(queue, finished);
                    ULONG i;
                    for (i = 0; i < slot->Length; ++i) {
                        if (data[i] == NvmePattern(slot->Tag + i, Pass)) continue;
                        if (mismatches++ == 0)
                            NhLog("nvmeof-host: queue %u: byte %llu reads 0x%02X, pass %u wrote 0x%02X\n", queue->Id,
                                  (unsigned long long)(slot->Tag + i), data[i], Pass, NvmePattern(slot->Tag + i, Pass));
                    }
                }
                NhRelease(queue, finished);
                ++done;
            }
        }
    }
    if (NT_SUCCESS(status) && mismatches != 0) status = STATUS_DATA_ERROR;
    return status;
}

static NTSTATUS NhFlushQueues(void) {
    ULONG q;
    for (q = 0; q < g_Nh.IoQueues; ++q) {
        NVME_COMMAND command;
        NVME_COMPLETION response;
        NTSTATUS status;
        RtlZeroMemory(&command, sizeof(command));
        command.Opcode = NVME_IO_FLUSH;
        command.NamespaceId = 1;
        status = NhExecute(&g_Nh.Io[q], &command, NhNoData, 0, &response);
        if (!NT_SUCCESS(status)) return status;
    }
    return STATUS_SUCCESS;
}

/* Reads posted to fill the last I/O queue, then the queue disconnected under them. */
static NTSTATUS NhTearDownInFlight(void) {
    PNH_QUEUE queue = &g_Nh.Io[g_Nh.IoQueues - 1];
    ULONG posted = 0, taken;
    ULONG unit = g_Nh.MaxTransfer;
    NTSTATUS status = STATUS_SUCCESS;
    while (NhNextFreeSlot(queue) >= 0) {
        NVME_COMMAND command;
        ULONG64 offset = ((ULONG64)posted * unit) % g_Nh.TestBytes;
        RtlZeroMemory(&command, sizeof(command));
        command.Opcode = NVME_IO_READ;
        command.NamespaceId = 1;
        command.Cdw10 = (ULONG)(offset / g_Nh.BlockSize);
        command.Cdw12 = (g_Nh.TestBytes - offset < unit ? (ULONG)(g_Nh.TestBytes - offset) : unit) / g_Nh.BlockSize - 1;
        status = NhSubmit(queue, &command, NhFromTarget, (command.Cdw12 + 1) * g_Nh.BlockSize, offset, &taken);
        if (!NT_SUCCESS(status)) break;
        ++posted;
    }
    NhLog("nvmeof-host: queue %u: %u reads posted, disconnecting under them\n", queue->Id, posted);
    if (!NT_SUCCESS(status)) return status;
    return NhFlushInFlight(queue);
}

/* ---- the benchmark ------------------------------------------------------------------------------------------ */

/* Opcode in Unit-byte commands on I/O queue 1 with Depth in flight, for BenchSeconds: random or sequential
 * offsets over the test range. Logs commands per second and MB/s. */
static NTSTATUS NhBench(PCSTR Name, UCHAR Opcode, ULONG Unit, ULONG Depth, BOOLEAN Random) {
    PNH_QUEUE queue = &g_Nh.Io[0];
    ULONG64 units = g_Nh.TestBytes / Unit, done = 0, next = 0, state = 0x9E3779B97F4A7C15ull, elapsedUs;
    LARGE_INTEGER frequency, start, now;
    LONGLONG limit;
    NTSTATUS status = STATUS_SUCCESS;
    start = KeQueryPerformanceCounter(&frequency);
    limit = start.QuadPart + frequency.QuadPart * g_Nh.BenchSeconds;
    now = start;
    for (;;) {
        ULONG finished, taken;
        while (now.QuadPart < limit && queue->InFlight < Depth && NhNextFreeSlot(queue) >= 0) {
            NVME_COMMAND command;
            ULONG64 index;
            if (Random) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                index = state % units;
            } else {
                index = next++ % units;
            }
            RtlZeroMemory(&command, sizeof(command));
            command.Opcode = Opcode;
            command.NamespaceId = 1;
            command.Cdw10 = (ULONG)(index * Unit / g_Nh.BlockSize);
            command.Cdw11 = (ULONG)((index * Unit / g_Nh.BlockSize) >> 32);
            command.Cdw12 = Unit / g_Nh.BlockSize - 1;
            status =
                NhSubmit(queue, &command, Opcode == NVME_IO_WRITE ? NhToTarget : NhFromTarget, Unit, index, &taken);
            if (!NT_SUCCESS(status)) return status;
        }
        if (queue->InFlight == 0) break;
        status = NhReap(queue, &finished, NH_WAIT_MS);
        if (!NT_SUCCESS(status)) return status;
        if (!NVME_STATUS_OK(queue->Commands[finished].Response.Status)) return STATUS_DEVICE_PROTOCOL_ERROR;
        NhRelease(queue, finished);
        ++done;
        now = KeQueryPerformanceCounter(NULL);
    }
    elapsedUs = (ULONG64)(now.QuadPart - start.QuadPart) * 1000000 / (ULONG64)frequency.QuadPart;
    if (elapsedUs == 0) elapsedUs = 1;
    NhLog("nvmeof-host: bench %s: %llu commands of %u bytes at depth %u in %llu us: %llu IOPS, %llu MB/s\n", Name,
          (unsigned long long)done, Unit, Depth, (unsigned long long)elapsedUs,
          (unsigned long long)(done * 1000000 / elapsedUs), (unsigned long long)(done * Unit / elapsedUs));
    return status;
}

static NTSTATUS NhRunBenchmark(void) {
    static const struct {
        PCSTR Name;
        UCHAR Opcode;
        ULONG Unit, Depth;
        BOOLEAN Random;
    } runs[] = {
        {"randread-4k-qd1", NVME_IO_READ, 4096, 1, TRUE},
        {"randwrite-4k-qd1", NVME_IO_WRITE, 4096, 1, TRUE},
        {"randread-4k-qd32", NVME_IO_READ, 4096, 32, TRUE},
        {"randwrite-4k-qd32", NVME_IO_WRITE, 4096, 32, TRUE},
        {"seqread-128k-qd32", NVME_IO_READ, 131072, 32, FALSE},
        {"seqwrite-128k-qd32", NVME_IO_WRITE, 131072, 32, FALSE},
    };
    ULONG i;
    for (i = 0; i < sizeof(runs) / sizeof(runs[0]); ++i) {
        NTSTATUS status;
        if (runs[i].Depth + 1 > g_Nh.Io[0].Depth) { /* a queue of depth D holds D - 1 */
            NhLog("nvmeof-host: bench %s skipped: it needs QueueDepth %u or more\n", runs[i].Name, runs[i].Depth + 1);
            continue;
        }
        status = NhBench(runs[i].Name, runs[i].Opcode, runs[i].Unit, runs[i].Depth, runs[i].Random);
        if (!NT_SUCCESS(status)) {
            NhStep(runs[i].Name, status);
            return status;
        }
    }
    return STATUS_SUCCESS;
}

/* ---- probes: commands a target must refuse, and how ------------------------------------------------------- */

/* Probe=1: each command below must be answered with its status (type << 8 | code) and Do Not Retry, and the
 * target must go on serving. For a target of our own (the samples' suites); Linux's nvmet answers some of them
 * with other codes. */
static NTSTATUS NhRunProbes(void) {
    static const struct {
        PCSTR Name;
        BOOLEAN Io;
        UCHAR Opcode;
        ULONG NamespaceId, Cdw10, Cdw12;
        NH_DATA Direction;
        ULONG Length;
        USHORT Expected;
    } probes[] = {
        {"Identify with an unknown CNS", FALSE, NVME_ADMIN_IDENTIFY, 0, 0x55, 0, NhFromTarget, 4096, 0x002},
        {"an unknown admin opcode", FALSE, 0xC5, 0, 0, 0, NhNoData, 0, 0x001},
        {"Get Log Page of an unknown page", FALSE, NVME_ADMIN_GET_LOG_PAGE, 0, 0x70 | (127u << 16), 0, NhFromTarget,
         512, 0x002},
        {"Read on namespace 2", TRUE, NVME_IO_READ, 2, 0, 0, NhFromTarget, 4096, 0x00B},
        {"an unknown I/O opcode", TRUE, 0x81, 1, 0, 0, NhNoData, 0, 0x001},
        {"Read of 256 KiB, above MDTS", TRUE, NVME_IO_READ, 1, 0, 0xFFFFFFFF, NhFromTarget, NH_MAX_TRANSFER, 0x002},
        {"Write whose SGL is shorter than its blocks", TRUE, NVME_IO_WRITE, 1, 0, 0xFFFFFFFE, NhToTarget, 512, 0x004},
        {"Read beyond the namespace", TRUE, NVME_IO_READ, 1, 0xFFFFFFFF, 0, NhFromTarget, 4096, 0x080},
    };
    ULONG i, passed = 0, count = sizeof(probes) / sizeof(probes[0]);
    for (i = 0; i < count; ++i) {
        NVME_COMMAND command;
        NVME_COMPLETION response;
        NTSTATUS status;
        USHORT got;
        RtlZeroMemory(&command, sizeof(command));
        RtlZeroMemory(&response, sizeof(response));
        command.Opcode = probes[i].Opcode;
        command.NamespaceId = probes[i].NamespaceId;
        command.Cdw10 = probes[i].Cdw10;
        command.Cdw12 = probes[i].Cdw12;
        if (probes[i].Cdw10 == 0xFFFFFFFF) command.Cdw10 = (ULONG)g_Nh.Blocks; /* the first block past the end */
        if (probes[i].Cdw12 == 0xFFFFFFFF) command.Cdw12 = 2 * NH_MAX_TRANSFER / g_Nh.BlockSize - 1;
        if (probes[i].Cdw12 == 0xFFFFFFFE) command.Cdw12 = 4096 / g_Nh.BlockSize - 1; /* 4 KiB of blocks */
        status = NhExecute(probes[i].Io ? &g_Nh.Io[0] : &g_Nh.Admin, &command, probes[i].Direction, probes[i].Length,
                           &response);
        got = (USHORT)((response.Status >> 1) & 0x7FF);
        if (status == STATUS_DEVICE_PROTOCOL_ERROR && got == probes[i].Expected && (response.Status & 0x8000)) {
            ++passed;
            NhLog("nvmeof-host: probe %s: status 0x%03X with Do Not Retry, as it should\n", probes[i].Name, got);
        } else {
            NhLog("nvmeof-host: probe %s: 0x%08X (%s), status 0x%03X%s; expected 0x%03X with Do Not Retry\n",
                  probes[i].Name, status, NhStatusText(status), got, (response.Status & 0x8000) ? " DNR" : "",
                  probes[i].Expected);
        }
    }
    NhLog("nvmeof-host: probes: %u of %u answered as they should\n", passed, count);
    return passed == count ? STATUS_SUCCESS : STATUS_INVALID_NETWORK_RESPONSE;
}

static NTSTATUS NhRunHost(void) {
    ULONG q;
    ULONG64 value;
    NTSTATUS status;
    PAGED_CODE();
    status = NhBringUp();
    if (!NT_SUCCESS(status)) return status;
    status = NhStartKeepAlive();
    if (!NT_SUCCESS(status)) return status;
    for (q = 0; q < g_Nh.IoQueues; ++q) {
        CHAR step[64];
        g_Nh.Io[q].Id = (USHORT)(q + 1);
        g_Nh.Io[q].Depth = (USHORT)g_Nh.QueueDepth;
        g_Nh.Io[q].InCapsuleBytes = g_Nh.InCapsuleBytes;
        g_Nh.Io[q].RemoteInvalidate = g_Nh.LocalInvalidateOnly ? FALSE : (g_Nh.RemoteInvalidateOnly || q % 2 == 0);
        status = NhConnectQueue(&g_Nh.Io[q]);
        if (NT_SUCCESS(status)) status = NhFabricsConnect(&g_Nh.Io[q]);
        RtlStringCbPrintfA(step, sizeof(step), "I/O queue %u (depth %u, %s invalidation): connect", q + 1,
                           g_Nh.QueueDepth, g_Nh.Io[q].RemoteInvalidate ? "remote" : "local");
        NhStep(step, status);
        if (!NT_SUCCESS(status)) return status;
    }
    if (g_Nh.TestBytes > g_Nh.Blocks * g_Nh.BlockSize) g_Nh.TestBytes = (ULONG)(g_Nh.Blocks * g_Nh.BlockSize);
    g_Nh.TestBytes -= g_Nh.TestBytes % NH_MAX_TRANSFER;
    if (g_Nh.TestBytes == 0) return STATUS_INVALID_PARAMETER;
    if (g_Nh.Probe) {
        status = NhRunProbes();
        NhStep("probes of the target's refusals", status);
        if (!NT_SUCCESS(status)) return status;
    }
    if (g_Nh.Benchmark) {
        status = NhRunBenchmark();
        NhStep("benchmark on I/O queue 1", status);
        if (!NT_SUCCESS(status)) return status;
        goto teardown;
    }
    status = NhRunPass(NVME_IO_WRITE, PAGE_SIZE, 1);
    NhStep(g_Nh.InCapsuleBytes >= PAGE_SIZE ? "pass 1: 4 KiB writes, data in the capsule"
                                            : "pass 1: 4 KiB writes, keyed SGLs",
           status);
    if (NT_SUCCESS(status)) {
        status = NhRunPass(NVME_IO_READ, g_Nh.MaxTransfer, 1);
        NhStep("pass 1: 128 KiB reads, every byte checked", status);
    }
    if (NT_SUCCESS(status)) {
        status = NhRunPass(NVME_IO_WRITE, g_Nh.MaxTransfer, 2);
        NhStep("pass 2: 128 KiB writes, keyed SGLs", status);
    }
    if (NT_SUCCESS(status)) {
        status = NhRunPass(NVME_IO_READ, PAGE_SIZE, 2);
        NhStep("pass 2: 4 KiB reads, every byte checked", status);
    }
    if (NT_SUCCESS(status)) {
        status = NhFlushQueues();
        NhStep("Flush on every I/O queue", status);
    }
    if (!NT_SUCCESS(status)) return status;
    NhLog("nvmeof-host: wrote and read back %u bytes twice over %u I/O queues, every byte verified\n", g_Nh.TestBytes,
          g_Nh.IoQueues);
    for (q = 0; q < g_Nh.IoQueues; ++q) {
        PNH_QUEUE queue = &g_Nh.Io[q];
        NhLog(
            "nvmeof-host: queue %u: %u writes with data in the capsule, %u keyed SGLs: %u MRs invalidated by the "
            "target, %u by us (%u of them the target was asked to)\n",
            queue->Id, queue->InCapsuleWrites, queue->KeyedCommands, queue->RemoteInvalidations,
            queue->LocalInvalidations, queue->RemoteNotHonoured);
    }
    status = NhTearDownInFlight();
    NhStep("teardown with commands in flight", status);
    if (!NT_SUCCESS(status)) return status;
teardown:
    status = NhStopKeepAlive();
    if (!NT_SUCCESS(status)) return status;
    value = NVME_CC_ENABLE | NVME_CC_QUEUE_ENTRY_SIZES | NVME_CC_SHUTDOWN_NORMAL;
    status = NhProperty(TRUE, NVME_PROPERTY_CC, FALSE, &value);
    for (q = 0; NT_SUCCESS(status) && q < 100; ++q) {
        LARGE_INTEGER pause;
        status = NhProperty(FALSE, NVME_PROPERTY_CSTS, FALSE, &value);
        if ((value & NVME_CSTS_SHUTDOWN_MASK) == NVME_CSTS_SHUTDOWN_COMPLETE) break;
        pause.QuadPart = -50 * 10000;
        KeDelayExecutionThread(KernelMode, FALSE, &pause);
    }
    if (NT_SUCCESS(status) && (value & NVME_CSTS_SHUTDOWN_MASK) != NVME_CSTS_SHUTDOWN_COMPLETE)
        status = STATUS_IO_TIMEOUT;
    NhStep("controller shutdown (CC.SHN, CSTS.SHST)", status);
    for (q = 0; q < g_Nh.IoQueues; ++q) NhTearDownQueue(&g_Nh.Io[q]);
    NhTearDownQueue(&g_Nh.Admin);
    NhStep("disconnect", STATUS_SUCCESS);
    return status;
}

VOID NhHostWorker(PDEVICE_OBJECT Device, PVOID Context) {
    UNREFERENCED_PARAMETER(Device);
    UNREFERENCED_PARAMETER(Context);
    g_Nh.Result = NhRunHost();
    if (g_Nh.KeepAliveRunning) NhStopKeepAlive(); /* a failed run leaves it going */
    NhStep("host done", g_Nh.Result);
    KeSetEvent(&g_Nh.HostDone, IO_NO_INCREMENT, FALSE);
    ExReleaseRundownProtection(&g_Nh.Rundown);
}
