/*++

Module Name:

    client.c

Abstract:

    smbdirect-client's worker: connect, negotiate SMB Direct and SMB2, open a guest session and the share, then
    for each file: a sweep of I/O sizes (1 byte up to LargestIo) each written and read back at its own offset, then
    the whole file written and read back in the largest I/O; every byte read is checked against the pattern,
    which depends only on the file and the offset (so overlapping writes agree, and the server's copy can be
    checked on its own). Then close, tree disconnect, logoff and a clean disconnect. Each step is said with its
    NTSTATUS in words; the last line is "client done: 0x... (...)".

Environment:

    Kernel mode (softndk kernel layer), a work item at PASSIVE_LEVEL.

--*/

#include "smbdirect_client.h"

/* The byte at Offset of file File. The interop suite computes the same to check the server's files. */
UCHAR ScPattern(ULONG File, ULONG64 Offset) {
    return (UCHAR)((Offset * 131) ^ (Offset >> 13) ^ (File * 0x3D) ^ 0x5A);
}

static ULONG ScMin(ULONG a, ULONG b) {
    return a < b ? a : b;
}

/* Which side invalidates the I/O's first MR: the parameter, or every other I/O each way. */
static BOOLEAN ScAskServerToInvalidate(ULONG Io) {
    if (g_Sc.RemoteInvalidateOnly) return TRUE;
    if (g_Sc.LocalInvalidateOnly) return FALSE;
    return (Io & 1) != 0;
}

/* WRITE Length bytes of the pattern at Offset, READ them back into a scrubbed buffer and compare. */
static NTSTATUS ScWriteReadBack(const SMB2_FILE_ID* File, ULONG Index, ULONG64 Offset, ULONG Length, PULONG Io) {
    ULONG i;
    NTSTATUS status;
    for (i = 0; i < Length; ++i) g_Sc.Data.Base[i] = ScPattern(Index, Offset + i);
    status = ScSmb2Write(File, Offset, Length, ScAskServerToInvalidate((*Io)++));
    if (!NT_SUCCESS(status)) {
        ScLog("smbdirect-client: file %u: WRITE of %u bytes at %llu: 0x%08X (%s)\n", Index, Length,
              (unsigned long long)Offset, status, ScStatusText(status));
        return status;
    }
    RtlFillMemory(g_Sc.Data.Base, Length, 0xEE);
    status = ScSmb2Read(File, Offset, Length, ScAskServerToInvalidate((*Io)++));
    if (!NT_SUCCESS(status)) {
        ScLog("smbdirect-client: file %u: READ of %u bytes at %llu: 0x%08X (%s)\n", Index, Length,
              (unsigned long long)Offset, status, ScStatusText(status));
        return status;
    }
    for (i = 0; i < Length; ++i) {
        if (g_Sc.Data.Base[i] != ScPattern(Index, Offset + i)) {
            ScLog("smbdirect-client: file %u: byte %llu read back as 0x%02X, 0x%02X was written\n", Index,
                  (unsigned long long)(Offset + i), g_Sc.Data.Base[i], ScPattern(Index, Offset + i));
            return STATUS_DATA_ERROR;
        }
    }
    return STATUS_SUCCESS;
}

/* The same with the data in the SMB Direct messages (no RDMA): a 64 KiB WRITE goes out in about 50 fragments and
 * its READ comes back in as many, reassembled, the server granted credits as it goes. */
static NTSTATUS ScInlineWriteReadBack(const SMB2_FILE_ID* File, ULONG Index, ULONG64 Offset, ULONG Length) {
    ULONG i;
    NTSTATUS status;
    for (i = 0; i < Length; ++i) g_Sc.Data.Base[i] = ScPattern(Index, Offset + i);
    g_Sc.InlineIos += 2;
    status = ScSmb2WriteInline(File, Offset, g_Sc.Data.Base, Length);
    if (NT_SUCCESS(status)) {
        RtlFillMemory(g_Sc.Data.Base, Length, 0xEE);
        status = ScSmb2ReadInline(File, Offset, g_Sc.Data.Base, Length);
    }
    for (i = 0; NT_SUCCESS(status) && i < Length; ++i) {
        if (g_Sc.Data.Base[i] != ScPattern(Index, Offset + i)) {
            ScLog("smbdirect-client: file %u: byte %llu read back inline as 0x%02X, 0x%02X was written\n", Index,
                  (unsigned long long)(Offset + i), g_Sc.Data.Base[i], ScPattern(Index, Offset + i));
            status = STATUS_DATA_ERROR;
        }
    }
    if (!NT_SUCCESS(status))
        ScLog("smbdirect-client: file %u: %u bytes at %llu in the messages: 0x%08X (%s)\n", Index, Length,
              (unsigned long long)Offset, status, ScStatusText(status));
    return status;
}

static NTSTATUS ScOneFile(ULONG Index, PULONG Io) {
    static const ULONG sweep[] = {1, 3, 4095, 4096, 65535, 65536, 65537, 1048576, 1048577, 8 * 1048576};
    ULONG largest = ScMin(ScMin(g_Sc.LargestIo, g_Sc.MaxReadWrite), ScMin(g_Sc.MaxRead, g_Sc.MaxWrite));
    WCHAR name[32];
    SMB2_FILE_ID file;
    ULONG i, sizes = 0;
    ULONG64 offset;
    NTSTATUS status = RtlStringCbPrintfW(name, sizeof(name), L"softndk-%u.bin", Index);
    if (!NT_SUCCESS(status)) return status;
    status = ScSmb2Create(name, &file);
    ScLog("smbdirect-client: CREATE %ls: 0x%08X (%s)\n", name, status, ScStatusText(status));
    if (!NT_SUCCESS(status)) return status;
    /* in the messages: one fragment, a few, and about fifty each way */
    static const ULONG inline_sizes[] = {1, 4000, SC_MAX_INLINE};
    for (i = 0; i < sizeof(inline_sizes) / sizeof(inline_sizes[0]) && NT_SUCCESS(status); ++i) {
        ULONG length = ScMin(inline_sizes[i], largest);
        offset = ((ULONG64)length * 131 + Index * 17) % ((ULONG64)largest - length + 1);
        status = ScInlineWriteReadBack(&file, Index, offset, length);
    }
    /* the sweep: each size at an offset of its own inside [0, largest) */
    for (i = 0; i < sizeof(sweep) / sizeof(sweep[0]) && NT_SUCCESS(status); ++i) {
        ULONG length = ScMin(sweep[i], largest);
        offset = ((ULONG64)length * 7919 + Index * 4099) % ((ULONG64)largest - length + 1);
        status = ScWriteReadBack(&file, Index, offset, length, Io);
        ++sizes;
        if (length == largest) break;
    }
    /* the whole file, in the largest I/O */
    for (offset = 0; NT_SUCCESS(status) && offset < g_Sc.LargestIo; offset += largest)
        status = ScWriteReadBack(&file, Index, offset, ScMin(largest, (ULONG)(g_Sc.LargestIo - offset)), Io);
    ScLog(
        "smbdirect-client: file %u (%ls): %u sizes from 1 byte to %u, then all %u bytes, written and read back: "
        "0x%08X (%s)\n",
        Index, name, sizes, largest, g_Sc.LargestIo, status, ScStatusText(status));
    if (NT_SUCCESS(status)) status = ScSmb2Close(&file);
    return status;
}

/* Benchmark=1: the file written once, then for BenchSeconds each: WRITE of 1 MiB, READ of 1 MiB, READ of 4 KiB,
 * one at a time. Each loop says its MB/s, its microseconds per I/O and the share of that time spent posting
 * fast-registers and invalidating; the rest is the SMB Direct and SMB2 exchange and the server. */
static NTSTATUS ScBenchmark(void) {
    static const struct {
        PCSTR Name;
        BOOLEAN Write;
        ULONG Size;
    } loops[] = {{"write", TRUE, 1048576}, {"read", FALSE, 1048576}, {"read", FALSE, 4096}};
    SMB2_FILE_ID file;
    ULONG i, io = 0;
    NTSTATUS status = ScSmb2Create(L"softndk-bench.bin", &file);
    ScStep("CREATE softndk-bench.bin", status);
    for (i = 0; NT_SUCCESS(status) && i < g_Sc.LargestIo; i += 1048576) status = ScSmb2Write(&file, i, 1048576, FALSE);
    for (i = 0; NT_SUCCESS(status) && i < sizeof(loops) / sizeof(loops[0]); ++i) {
        ULONG64 start = KeQueryInterruptTime(), end = start + (ULONG64)g_Sc.BenchSeconds * 10000000, now = start;
        ULONG64 registerBefore = g_Sc.RegisterTime, offset = 0, count = 0;
        while (NT_SUCCESS(status) && now < end) {
            BOOLEAN invalidate = ScAskServerToInvalidate(io++);
            status = loops[i].Write ? ScSmb2Write(&file, offset, loops[i].Size, invalidate)
                                    : ScSmb2Read(&file, offset, loops[i].Size, invalidate);
            offset = (offset + loops[i].Size) % (g_Sc.LargestIo - loops[i].Size + 1);
            ++count;
            now = KeQueryInterruptTime();
        }
        if (NT_SUCCESS(status) && count != 0)
            ScLog(
                "smbdirect-client: bench %s %u: %llu I/Os in %llu ms: %llu MB/s, %llu us per I/O, %llu%% of it "
                "registering and invalidating\n",
                loops[i].Name, loops[i].Size, (unsigned long long)count, (unsigned long long)(now - start) / 10000,
                (unsigned long long)(count * loops[i].Size * 10 / (now - start)),
                (unsigned long long)((now - start) / 10 / count),
                (unsigned long long)((g_Sc.RegisterTime - registerBefore) * 100 / (now - start)));
    }
    if (NT_SUCCESS(status)) status = ScSmb2Close(&file);
    return status;
}

static NTSTATUS ScRun(void) {
    ULONG i, io = 0;
    NTSTATUS status = ScConnect();
    ScStep("RDMA connection to the server", status);
    if (!NT_SUCCESS(status)) return status;
    status = ScNegotiateTransport();
    ScStep("SMB Direct negotiate", status);
    if (!NT_SUCCESS(status)) return status;
    status = ScSmb2Negotiate();
    ScStep("SMB2 NEGOTIATE", status);
    if (!NT_SUCCESS(status)) return status;
    status = ScSmb2SessionSetup();
    ScStep(g_Sc.User[0] ? "SMB2 SESSION_SETUP (NTLMv2, signed)" : "SMB2 SESSION_SETUP (guest)", status);
    if (!NT_SUCCESS(status)) return status;
    status = ScSmb2TreeConnect();
    ScStep("SMB2 TREE_CONNECT", status);
    if (!NT_SUCCESS(status)) return status;
    status = ScKeepalive();
    ScStep("SMB Direct keepalive (an empty message asking for an answer)", status);
    if (!NT_SUCCESS(status)) return status;
    if (g_Sc.Benchmark) {
        status = ScBenchmark();
        ScStep("benchmark", status);
    }
    for (i = 0; !g_Sc.Benchmark && i < g_Sc.Files && NT_SUCCESS(status); ++i) status = ScOneFile(i, &io);
    if (!NT_SUCCESS(status)) return status;
    if (!g_Sc.Benchmark)
        ScLog(
            "smbdirect-client: every byte verified: %u files, %llu bytes written and %llu read back (%u I/Os by RDMA, "
            "%u in the messages); first MRs invalidated by the server %u, MRs invalidated by us %u\n",
            g_Sc.Files, (unsigned long long)g_Sc.BytesWritten, (unsigned long long)g_Sc.BytesRead, io, g_Sc.InlineIos,
            g_Sc.RemoteInvalidations, g_Sc.LocalInvalidations);
    if (g_Sc.Signing)
        ScLog(
            "smbdirect-client: signing: %u requests signed, %u responses' signatures verified (%u of them READ "
            "responses signed over a length prefix, as Linux 6.1's ksmbd does)\n",
            g_Sc.RequestsSigned, g_Sc.SignaturesVerified, g_Sc.ReadSignaturesWithPrefix);
    status = ScSmb2TreeDisconnect();
    ScStep("SMB2 TREE_DISCONNECT", status);
    if (!NT_SUCCESS(status)) return status;
    status = ScSmb2Logoff();
    ScStep("SMB2 LOGOFF", status);
    if (!NT_SUCCESS(status)) return status;
    ScLog(
        "smbdirect-client: SMB Direct: %u messages sent in %u fragments, %u received in %u fragments, %u "
        "credit-only messages received, %u answers to the server's requests, %u credit grants sent inside its long "
        "messages\n",
        g_Sc.MessagesOut, g_Sc.FragmentsOut, g_Sc.MessagesIn, g_Sc.FragmentsIn, g_Sc.CreditOnlyMessages,
        g_Sc.KeepalivesAnswered, g_Sc.CreditGrantsSent);
    ScDisconnect();
    return STATUS_SUCCESS;
}

VOID ScClientWorker(PDEVICE_OBJECT Device, PVOID Context) {
    UNREFERENCED_PARAMETER(Device);
    UNREFERENCED_PARAMETER(Context);
    PAGED_CODE();
    g_Sc.Result = ScRun();
    ScLog("smbdirect-client: client done: 0x%08X (%s)\n", g_Sc.Result, ScStatusText(g_Sc.Result));
    KeSetEvent(&g_Sc.ClientDone, IO_NO_INCREMENT, FALSE);
    ExReleaseRundownProtection(&g_Sc.Rundown);
}
