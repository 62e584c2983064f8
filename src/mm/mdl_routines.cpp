// The wdm.h MDL routines in user mode (MDL-01 … MDL-13, docs/requirements.md).
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <softndk/wdm.h>

#include "common/last_error.h"
#include "mm/locked_page_registry.h"

using softndk::SetLastErrorText;
using softndk::mm::LockedPageRegistry;

namespace {

constexpr ULONG kMaxIoAllocateMdlLength = 0xFFFFFFFFu - PAGE_SIZE + 1;  // MDL-06: 4 GB - PAGE_SIZE

ULONG SpanPages(const MDL* mdl) {
    return ADDRESS_AND_SIZE_TO_SPAN_PAGES(MmGetMdlVirtualAddress(mdl), mdl->ByteCount);
}

// The routine would raise or bugcheck in the kernel; here it says why and leaves the MDL alone.
void ReportMisuse(const char* routine, const char* why) {
    SetLastErrorText("%s: %s", routine, why);
    std::fprintf(stderr, "softndk: %s: %s (the kernel routine would bugcheck)\n", routine, why);
}

}  // namespace

extern "C" {

SIZE_T MmSizeOfMdl(PVOID Base, SIZE_T Length) {
    return sizeof(MDL) + sizeof(PFN_NUMBER) * ADDRESS_AND_SIZE_TO_SPAN_PAGES(Base, Length);
}

VOID MmInitializeMdl(PMDL MemoryDescriptorList, PVOID BaseVa, SIZE_T Length) {
    MDL* mdl = MemoryDescriptorList;
    mdl->Next = nullptr;
    mdl->Size = static_cast<CSHORT>(MmSizeOfMdl(BaseVa, Length));
    mdl->MdlFlags = 0;
    mdl->Process = nullptr;
    mdl->MappedSystemVa = nullptr;
    mdl->StartVa = PAGE_ALIGN(BaseVa);
    mdl->ByteOffset = BYTE_OFFSET(BaseVa);
    mdl->ByteCount = static_cast<ULONG>(Length);
}

PMDL IoAllocateMdl(PVOID VirtualAddress, ULONG Length, BOOLEAN SecondaryBuffer, BOOLEAN ChargeQuota, PIRP Irp) {
    (void)ChargeQuota;  // MDL-06: reserved, must be FALSE; ignored
    if (Irp != nullptr || SecondaryBuffer) {
        SetLastErrorText("IoAllocateMdl: IRPs do not exist in user mode; Irp must be NULL and SecondaryBuffer FALSE");
        return nullptr;
    }
    if (Length > kMaxIoAllocateMdlLength) {
        SetLastErrorText("IoAllocateMdl: Length %u exceeds 4 GB - PAGE_SIZE", Length);
        return nullptr;
    }
    SIZE_T bytes = MmSizeOfMdl(VirtualAddress, Length);
    auto* mdl = static_cast<MDL*>(std::calloc(1, bytes));
    if (mdl == nullptr) return nullptr;
    MmInitializeMdl(mdl, VirtualAddress, Length);
    // Size is a CSHORT: the real one wraps for large MDLs too; only the PFN array length matters here.
    mdl->MdlFlags = MDL_ALLOCATED_FIXED_SIZE;
    return mdl;
}

VOID IoFreeMdl(PMDL Mdl) {
    if (Mdl == nullptr) return;
    if (Mdl->MdlFlags & MDL_PAGES_LOCKED) {
        ReportMisuse("IoFreeMdl", "the MDL's pages are still locked; call MmUnlockPages first (MDL-11)");
    }
    std::free(Mdl);  // MDL-11: frees only this MDL, never the chain
}

VOID MmBuildMdlForNonPagedPool(PMDL MemoryDescriptorList) {
    MDL* mdl = MemoryDescriptorList;
    if (mdl == nullptr) return;
    auto first = reinterpret_cast<ULONG_PTR>(mdl->StartVa) >> PAGE_SHIFT;
    PFN_NUMBER* pfns = MmGetMdlPfnArray(mdl);
    ULONG pages = SpanPages(mdl);
    for (ULONG i = 0; i < pages; ++i) pfns[i] = first + i;
    mdl->MappedSystemVa = MmGetMdlVirtualAddress(mdl);  // MDL-07
    mdl->MdlFlags |= MDL_SOURCE_IS_NONPAGED_POOL;
}

NTSTATUS SoftNdkProbeAndLockPages(PMDL MemoryDescriptorList, KPROCESSOR_MODE AccessMode, LOCK_OPERATION Operation) {
    MDL* mdl = MemoryDescriptorList;
    if (mdl == nullptr || (AccessMode != KernelMode && AccessMode != UserMode) || Operation < IoReadAccess ||
        Operation > IoModifyAccess) {
        SetLastErrorText("SoftNdkProbeAndLockPages: NULL MDL, bad AccessMode or bad Operation");
        return STATUS_INVALID_PARAMETER;
    }
    if (mdl->MdlFlags & (MDL_PAGES_LOCKED | MDL_SOURCE_IS_NONPAGED_POOL | MDL_PARTIAL)) {
        SetLastErrorText("SoftNdkProbeAndLockPages: MDL already locked, non-paged or partial (MDL-08)");
        return STATUS_INVALID_PARAMETER;
    }
    if (mdl->ByteCount == 0) {
        SetLastErrorText("SoftNdkProbeAndLockPages: zero-length MDL (AMB-40)");
        return STATUS_INVALID_PARAMETER;
    }
    auto start = reinterpret_cast<ULONG_PTR>(mdl->StartVa);
    ULONG pages = SpanPages(mdl);
    if (start + (static_cast<ULONG_PTR>(pages) << PAGE_SHIFT) < start) {
        SetLastErrorText("SoftNdkProbeAndLockPages: range wraps the address space");
        return STATUS_ACCESS_VIOLATION;
    }
    // Probe: fault the pages in with the requested access without touching their contents.
    int advice = Operation == IoReadAccess ? MADV_POPULATE_READ : MADV_POPULATE_WRITE;
    if (madvise(mdl->StartVa, static_cast<size_t>(pages) << PAGE_SHIFT, advice) != 0) {
        SetLastErrorText("SoftNdkProbeAndLockPages: %u pages at %p are not mapped %s (%s)", pages, mdl->StartVa,
                         Operation == IoReadAccess ? "readable" : "writable", std::strerror(errno));
        return STATUS_ACCESS_VIOLATION;
    }
    NTSTATUS status = LockedPageRegistry::Instance().Lock(start >> PAGE_SHIFT, pages);
    if (!NT_SUCCESS(status)) return status;
    PFN_NUMBER* pfns = MmGetMdlPfnArray(mdl);
    for (ULONG i = 0; i < pages; ++i) pfns[i] = (start >> PAGE_SHIFT) + i;
    mdl->MdlFlags |= MDL_PAGES_LOCKED;
    if (Operation != IoReadAccess) mdl->MdlFlags |= MDL_WRITE_OPERATION;
    return STATUS_SUCCESS;
}

VOID MmProbeAndLockPages(PMDL MemoryDescriptorList, KPROCESSOR_MODE AccessMode, LOCK_OPERATION Operation) {
    NTSTATUS status = SoftNdkProbeAndLockPages(MemoryDescriptorList, AccessMode, Operation);
    if (!NT_SUCCESS(status)) {
        std::fprintf(stderr,
                     "softndk: MmProbeAndLockPages raised 0x%08X: %s\n"
                     "softndk: the kernel routine raises an exception here; call SoftNdkProbeAndLockPages to get "
                     "the status instead\n",
                     static_cast<unsigned>(status), SoftNdkGetLastErrorText());
        std::abort();
    }
}

VOID MmUnlockPages(PMDL MemoryDescriptorList) {
    MDL* mdl = MemoryDescriptorList;
    if (mdl == nullptr || !(mdl->MdlFlags & MDL_PAGES_LOCKED)) {
        ReportMisuse("MmUnlockPages", "the MDL was not locked by MmProbeAndLockPages (MDL-09)");
        return;
    }
    const PFN_NUMBER* pfns = MmGetMdlPfnArray(mdl);
    ULONG pages = SpanPages(mdl);
    // Unlock run by run: the PFNs are what the registry knows.
    ULONG run_start = 0;
    for (ULONG i = 1; i <= pages; ++i) {
        if (i == pages || pfns[i] != pfns[i - 1] + 1) {
            LockedPageRegistry::Instance().Unlock(pfns[run_start], i - run_start);
            run_start = i;
        }
    }
    mdl->MdlFlags &= ~(MDL_PAGES_LOCKED | MDL_WRITE_OPERATION | MDL_MAPPED_TO_SYSTEM_VA);
    mdl->MappedSystemVa = nullptr;
}

VOID IoBuildPartialMdl(PMDL SourceMdl, PMDL TargetMdl, PVOID VirtualAddress, ULONG Length) {
    if (SourceMdl == nullptr || TargetMdl == nullptr) {
        ReportMisuse("IoBuildPartialMdl", "NULL MDL");
        return;
    }
    auto source_va = reinterpret_cast<ULONG_PTR>(MmGetMdlVirtualAddress(SourceMdl));
    auto source_end = source_va + SourceMdl->ByteCount;
    auto va = reinterpret_cast<ULONG_PTR>(VirtualAddress);
    if (va < source_va || va >= source_end) {
        ReportMisuse("IoBuildPartialMdl", "VirtualAddress is outside the source MDL (MDL-10)");
        return;
    }
    if (Length == 0) Length = static_cast<ULONG>(source_end - va);  // MDL-10: the rest of the source
    if (Length > source_end - va) {
        ReportMisuse("IoBuildPartialMdl", "VirtualAddress + Length is beyond the source MDL (MDL-10)");
        return;
    }
    if (!(SourceMdl->MdlFlags & (MDL_PAGES_LOCKED | MDL_SOURCE_IS_NONPAGED_POOL | MDL_PARTIAL))) {
        ReportMisuse("IoBuildPartialMdl", "the source MDL's pages are not locked");
        return;
    }
    CSHORT keep = TargetMdl->MdlFlags & MDL_ALLOCATED_FIXED_SIZE;
    MmInitializeMdl(TargetMdl, VirtualAddress, Length);
    auto first_page = static_cast<ULONG>(
        (reinterpret_cast<ULONG_PTR>(PAGE_ALIGN(va)) - reinterpret_cast<ULONG_PTR>(SourceMdl->StartVa)) >> PAGE_SHIFT);
    std::memcpy(MmGetMdlPfnArray(TargetMdl), MmGetMdlPfnArray(SourceMdl) + first_page,
                sizeof(PFN_NUMBER) * SpanPages(TargetMdl));
    TargetMdl->MdlFlags = keep | MDL_PARTIAL;
    if (SourceMdl->MdlFlags & MDL_SOURCE_IS_NONPAGED_POOL) TargetMdl->MdlFlags |= MDL_SOURCE_IS_NONPAGED_POOL;
    if (SourceMdl->MappedSystemVa != nullptr &&
        (SourceMdl->MdlFlags & (MDL_MAPPED_TO_SYSTEM_VA | MDL_SOURCE_IS_NONPAGED_POOL | MDL_PARENT_MAPPED_SYSTEM_VA))) {
        // The partial MDL shares the source's mapping.
        TargetMdl->MappedSystemVa = static_cast<char*>(SourceMdl->MappedSystemVa) + (va - source_va);
        TargetMdl->MdlFlags |= MDL_PARENT_MAPPED_SYSTEM_VA;
    }
}

VOID MmPrepareMdlForReuse(PMDL Mdl) {
    if (Mdl == nullptr) return;
    if (Mdl->MdlFlags & MDL_PARTIAL_HAS_BEEN_MAPPED) {
        Mdl->MdlFlags &= ~(MDL_PARTIAL_HAS_BEEN_MAPPED | MDL_MAPPED_TO_SYSTEM_VA);
        Mdl->MappedSystemVa = nullptr;
    }
}

PVOID MmGetSystemAddressForMdlSafe(PMDL Mdl, ULONG Priority) {
    (void)Priority;
    if (Mdl == nullptr) return nullptr;
    if (Mdl->MdlFlags & (MDL_MAPPED_TO_SYSTEM_VA | MDL_SOURCE_IS_NONPAGED_POOL | MDL_PARENT_MAPPED_SYSTEM_VA))
        return Mdl->MappedSystemVa;                                           // MDL-12: reuse the existing mapping
    if (!(Mdl->MdlFlags & (MDL_PAGES_LOCKED | MDL_PARTIAL))) return nullptr;  // MDL-12: must be locked
    // The "system address" of a PFN run is the host address itself. Pages that are not one contiguous
    // run cannot be mapped into one range here: return NULL, as a mapping failure would.
    const PFN_NUMBER* pfns = MmGetMdlPfnArray(Mdl);
    ULONG pages = SpanPages(Mdl);
    for (ULONG i = 1; i < pages; ++i)
        if (pfns[i] != pfns[0] + i) return nullptr;
    if (!LockedPageRegistry::Instance().IsLocked(pfns[0], pages)) return nullptr;
    Mdl->MappedSystemVa = reinterpret_cast<PVOID>((pfns[0] << PAGE_SHIFT) + Mdl->ByteOffset);
    Mdl->MdlFlags |= (Mdl->MdlFlags & MDL_PARTIAL) ? (MDL_PARTIAL_HAS_BEEN_MAPPED | MDL_MAPPED_TO_SYSTEM_VA)
                                                   : MDL_MAPPED_TO_SYSTEM_VA;
    return Mdl->MappedSystemVa;
}

}  // extern "C"
