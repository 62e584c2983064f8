/* softndk — user-mode memory manager with wdm.h names (the MDL pages: MDL-01 … MDL-13
 * in docs/requirements.md).
 * A "physical page" is a host page locked in RAM; PFN_NUMBER = host address >> PAGE_SHIFT. */
#ifndef SOFTNDK_WDM_H
#define SOFTNDK_WDM_H

#include <softndk/ndkpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PAGE_SIZE 0x1000u
#define PAGE_SHIFT 12

typedef ULONG_PTR PFN_NUMBER, *PPFN_NUMBER;
typedef CHAR KPROCESSOR_MODE;
#define KernelMode ((KPROCESSOR_MODE)0)
#define UserMode ((KPROCESSOR_MODE)1)

typedef enum _LOCK_OPERATION { IoReadAccess = 0, IoWriteAccess = 1, IoModifyAccess = 2 } LOCK_OPERATION;

typedef struct _EPROCESS* PEPROCESS;
typedef struct _IRP* PIRP;

/* The MDL header: 48 bytes on x64, the PFN array follows. */
struct _MDL {
    struct _MDL* Next;
    CSHORT Size;
    CSHORT MdlFlags;
    struct _EPROCESS* Process;
    PVOID MappedSystemVa;
    PVOID StartVa;
    ULONG ByteCount;
    ULONG ByteOffset;
};

#define MDL_MAPPED_TO_SYSTEM_VA 0x0001
#define MDL_PAGES_LOCKED 0x0002
#define MDL_SOURCE_IS_NONPAGED_POOL 0x0004
#define MDL_ALLOCATED_FIXED_SIZE 0x0008
#define MDL_PARTIAL 0x0010
#define MDL_PARTIAL_HAS_BEEN_MAPPED 0x0020
#define MDL_IO_PAGE_READ 0x0040
#define MDL_WRITE_OPERATION 0x0080
#define MDL_LOCKED_PAGE_TABLES 0x0100
#define MDL_PARENT_MAPPED_SYSTEM_VA MDL_LOCKED_PAGE_TABLES
#define MDL_FREE_EXTRA_PTES 0x0200
#define MDL_DESCRIBES_AWE 0x0400
#define MDL_IO_SPACE 0x0800
#define MDL_NETWORK_HEADER 0x1000
#define MDL_MAPPING_CAN_FAIL 0x2000
#define MDL_PAGE_CONTENTS_INVARIANT 0x4000
#define MDL_ALLOCATED_MUST_SUCCEED MDL_PAGE_CONTENTS_INVARIANT
#define MDL_INTERNAL 0x8000

/* Page helpers (MDL-13). */
#define BYTE_OFFSET(Va) ((ULONG)((ULONG_PTR)(Va) & (PAGE_SIZE - 1)))
#define PAGE_ALIGN(Va) ((PVOID)((ULONG_PTR)(Va) & ~((ULONG_PTR)PAGE_SIZE - 1)))
#define ROUND_TO_PAGES(Size) (((ULONG_PTR)(Size) + PAGE_SIZE - 1) & ~((ULONG_PTR)PAGE_SIZE - 1))
#define BYTES_TO_PAGES(Size) (((SIZE_T)(Size) >> PAGE_SHIFT) + ((((SIZE_T)(Size)) & (PAGE_SIZE - 1)) != 0))
#define ADDRESS_AND_SIZE_TO_SPAN_PAGES(Va, Size)   \
    ((ULONG)((((ULONG_PTR)(Size)) >> PAGE_SHIFT) + \
             ((BYTE_OFFSET(Va) + (((ULONG_PTR)(Size)) & (PAGE_SIZE - 1)) + (PAGE_SIZE - 1)) >> PAGE_SHIFT)))

/* MDL accessors (MDL-03, MDL-04). */
#define MmGetMdlVirtualAddress(Mdl) ((PVOID)((PCHAR)((Mdl)->StartVa) + (Mdl)->ByteOffset))
#define MmGetMdlByteCount(Mdl) ((Mdl)->ByteCount)
#define MmGetMdlByteOffset(Mdl) ((Mdl)->ByteOffset)
#define MmGetMdlBaseVa(Mdl) ((Mdl)->StartVa)
#define MmGetMdlPfnArray(Mdl) ((PPFN_NUMBER)((Mdl) + 1))

/* MmGetSystemAddressForMdlSafe priorities. */
typedef enum _MM_PAGE_PRIORITY { LowPagePriority = 0, NormalPagePriority = 16, HighPagePriority = 32 } MM_PAGE_PRIORITY;
#define MdlMappingNoWrite 0x80000000u
#define MdlMappingNoExecute 0x40000000u

/* MDL routines (MDL-05 … MDL-12). */
SOFTNDK_API SIZE_T MmSizeOfMdl(PVOID Base, SIZE_T Length);
SOFTNDK_API VOID MmInitializeMdl(PMDL MemoryDescriptorList, PVOID BaseVa, SIZE_T Length);
SOFTNDK_API PMDL IoAllocateMdl(PVOID VirtualAddress, ULONG Length, BOOLEAN SecondaryBuffer, BOOLEAN ChargeQuota,
                               PIRP Irp);
SOFTNDK_API VOID IoFreeMdl(PMDL Mdl);
SOFTNDK_API VOID IoBuildPartialMdl(PMDL SourceMdl, PMDL TargetMdl, PVOID VirtualAddress, ULONG Length);
SOFTNDK_API VOID MmBuildMdlForNonPagedPool(PMDL MemoryDescriptorList);
SOFTNDK_API VOID MmProbeAndLockPages(PMDL MemoryDescriptorList, KPROCESSOR_MODE AccessMode, LOCK_OPERATION Operation);
SOFTNDK_API VOID MmUnlockPages(PMDL MemoryDescriptorList);
SOFTNDK_API VOID MmPrepareMdlForReuse(PMDL Mdl);
SOFTNDK_API PVOID MmGetSystemAddressForMdlSafe(PMDL Mdl, ULONG Priority);

/* Returns an NTSTATUS where MmProbeAndLockPages would raise: STATUS_ACCESS_VIOLATION for an unmapped or
 * wrongly-protected range, STATUS_WORKING_SET_QUOTA when RLIMIT_MEMLOCK stops mlock,
 * STATUS_INVALID_PARAMETER for a bad MDL. SoftNdkGetLastErrorText() says why. */
SOFTNDK_API NTSTATUS SoftNdkProbeAndLockPages(PMDL MemoryDescriptorList, KPROCESSOR_MODE AccessMode,
                                              LOCK_OPERATION Operation);

/* Pool. POOL_FLAG_NON_PAGED memory is page-aligned and locked (registered in the locked-page registry). */
typedef ULONG64 POOL_FLAGS;
#define POOL_FLAG_UNINITIALIZED 0x0000000000000002ULL
#define POOL_FLAG_NON_PAGED 0x0000000000000040ULL
#define POOL_FLAG_PAGED 0x0000000000000100ULL
SOFTNDK_API PVOID ExAllocatePool2(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag);
SOFTNDK_API VOID ExFreePool(PVOID P);
/* Special pool, as Driver Verifier's (issue 19 §3): each block on its own pages before a guard page, freed
 * blocks protected and kept out of reuse a while; an access to freed pool or past a block's end stops the process
 * with a report (bug check, pool tag, address, where the block was allocated and freed). The kernel layer turns
 * it on with its Verifier unless SOFTNDK_SPECIAL_POOL=off. */
SOFTNDK_API VOID SoftNdkSetSpecialPool(BOOLEAN Enable);

/* Text describing the last failure of a softndk call on this thread ("" if none). */
SOFTNDK_API const char* SoftNdkGetLastErrorText(void);
/* Empties this thread's text, so that a caller can tell whether the next call recorded one. */
SOFTNDK_API VOID SoftNdkClearLastErrorText(void);

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_WDM_H */
