/* softndk kernel layer — ntdef.h: base types, status codes and the helper macros of the WDK (issue 9 §2).
 * Built on softndk/ndkpi.h, which already defines the NDK base types, so a driver that includes both sees one
 * definition of each. Plain C11 and C++20.
 *
 * Differences from the WDK, by design: WCHAR is wchar_t (32 bits on Linux) so L"..." literals keep working
 * unchanged; UNICODE_STRING lengths stay in bytes (count * sizeof(WCHAR)). min/max are defined for C only. */
#ifndef SOFTNDK_KM_NTDEF_H
#define SOFTNDK_KM_NTDEF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <wchar.h>

#include <softndk/ndkpi.h>
#include <softndk/km/sal.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef SOFTNDK_KM_API
#define SOFTNDK_KM_API __attribute__((visibility("default")))
#endif

/* ---- calling conventions and storage classes: one convention on x86-64 ---- */
#define NTAPI
#define WINAPI
#define NTSYSAPI
#define NTSYSCALLAPI
#define NTKERNELAPI
#define NTHALAPI
#define DECLSPEC_IMPORT
#define DECLSPEC_EXPORT
#define DECLSPEC_NOINLINE __attribute__((noinline))
#define DECLSPEC_NORETURN __attribute__((noreturn))
#define DECLSPEC_ALIGN(x) __attribute__((aligned(x)))
#define DECLSPEC_CACHEALIGN DECLSPEC_ALIGN(64)
#define FORCEINLINE static inline __attribute__((always_inline))
#ifdef __cplusplus
#define EXTERN_C extern "C"
#define EXTERN_C_START extern "C" {
#define EXTERN_C_END }
#else
#define EXTERN_C extern
#define EXTERN_C_START
#define EXTERN_C_END
#endif
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef OPTIONAL
#define OPTIONAL
#endif
#ifndef DBG
#define DBG 0
#endif

/* ---- types not in ndkpi.h ---- */
typedef signed char SCHAR;
typedef short SHORT;
typedef int INT;
typedef unsigned int UINT;
typedef char CCHAR;
typedef int8_t INT8;
typedef uint8_t UINT8;
typedef int16_t INT16;
typedef uint16_t UINT16;
typedef int32_t INT32;
typedef int64_t INT64;
typedef int32_t LONG32;
typedef uint32_t ULONG32;
typedef uint32_t DWORD32;
typedef uint64_t DWORD64;
typedef int64_t LONG64;
typedef uint32_t DWORD;
typedef uint16_t WORD;
typedef uint8_t BYTE;
typedef intptr_t LONG_PTR;
typedef intptr_t INT_PTR;
typedef uintptr_t UINT_PTR;
typedef uintptr_t DWORD_PTR;
typedef intptr_t SSIZE_T;
typedef ULONG LOGICAL;
typedef ULONG* PLOGICAL;
typedef LONG KPRIORITY;
typedef UCHAR KIRQL, *PKIRQL;
typedef void* HANDLE;
typedef HANDLE* PHANDLE;
typedef wchar_t WCHAR;
typedef WCHAR *PWCHAR, *PWCH, *PWSTR, *LPWSTR;
typedef const WCHAR *PCWCH, *PCWSTR, *LPCWSTR;
typedef CHAR *PSTR, *LPSTR, *PCH;
typedef const CHAR *PCSTR, *LPCSTR, *PCCH;
typedef const void* PCVOID;
typedef const void* LPCVOID;
typedef UCHAR* PUCHAR;
typedef USHORT* PUSHORT;
typedef SHORT* PSHORT;
typedef LONG* PLONG;
typedef LONGLONG* PLONGLONG;
typedef ULONGLONG* PULONGLONG;
typedef ULONG64* PULONG64;
typedef LONG64* PLONG64;
typedef INT* PINT;
typedef UINT* PUINT;
typedef BOOLEAN* PBOOLEAN;
typedef SIZE_T* PSIZE_T;
typedef ULONG_PTR* PULONG_PTR;
typedef LONG_PTR* PLONG_PTR;
typedef NTSTATUS* PNTSTATUS;
typedef GUID* PGUID;
typedef const GUID* LPCGUID;
typedef const GUID* PCGUID;
typedef PVOID* PPVOID;
typedef ULONG ACCESS_MASK;
typedef KAFFINITY* PKAFFINITY;
typedef CSHORT* PCSHORT;

typedef union _ULARGE_INTEGER {
    struct {
        ULONG LowPart;
        ULONG HighPart;
    };
    struct {
        ULONG LowPart;
        ULONG HighPart;
    } u;
    ULONGLONG QuadPart;
} ULARGE_INTEGER, *PULARGE_INTEGER;

/* ---- status codes beyond the NDK set ---- */
#define STATUS_WAIT_0 ((NTSTATUS)0x00000000L)
#define STATUS_WAIT_1 ((NTSTATUS)0x00000001L)
#define STATUS_WAIT_63 ((NTSTATUS)0x0000003FL)
#define STATUS_ABANDONED_WAIT_0 ((NTSTATUS)0x00000080L)
#define STATUS_USER_APC ((NTSTATUS)0x000000C0L)
#define STATUS_ALERTED ((NTSTATUS)0x00000101L)
#define STATUS_TIMEOUT ((NTSTATUS)0x00000102L)
#define STATUS_MORE_ENTRIES ((NTSTATUS)0x00000105L)
#define STATUS_NOT_IMPLEMENTED ((NTSTATUS)0xC0000002L)
#define STATUS_INVALID_INFO_CLASS ((NTSTATUS)0xC0000003L)
#define STATUS_INFO_LENGTH_MISMATCH ((NTSTATUS)0xC0000004L)
#define STATUS_NO_SUCH_DEVICE ((NTSTATUS)0xC000000EL)
#define STATUS_INVALID_DEVICE_REQUEST ((NTSTATUS)0xC0000010L)
#define STATUS_END_OF_FILE ((NTSTATUS)0xC0000011L)
#define STATUS_NO_MEMORY ((NTSTATUS)0xC0000017L)
#define STATUS_OBJECT_NAME_INVALID ((NTSTATUS)0xC0000033L)
#define STATUS_OBJECT_NAME_NOT_FOUND ((NTSTATUS)0xC0000034L)
#define STATUS_OBJECT_NAME_COLLISION ((NTSTATUS)0xC0000035L)
#define STATUS_DEVICE_NOT_READY ((NTSTATUS)0xC00000A3L)
#define STATUS_DEVICE_BUSY ((NTSTATUS)0x80000011L)
#define STATUS_NO_MORE_ENTRIES ((NTSTATUS)0x8000001AL)
#define STATUS_INVALID_BUFFER_SIZE ((NTSTATUS)0xC0000206L)
#define STATUS_INTEGER_OVERFLOW ((NTSTATUS)0xC0000095L)
#define STATUS_NOT_FOUND ((NTSTATUS)0xC0000225L)
#define STATUS_RETRY ((NTSTATUS)0xC000022DL)
#define STATUS_DATA_ERROR ((NTSTATUS)0xC000003EL)
#define STATUS_DEVICE_PROTOCOL_ERROR ((NTSTATUS)0xC0000186L)
#define STATUS_CRC_ERROR ((NTSTATUS)0xC000003FL)
#define STATUS_UNEXPECTED_NETWORK_ERROR ((NTSTATUS)0xC00000C4L)
#define STATUS_INVALID_NETWORK_RESPONSE ((NTSTATUS)0xC00000C3L)
#define STATUS_DELETE_PENDING ((NTSTATUS)0xC0000056L)

/* ---- helper macros ---- */
#define FIELD_OFFSET(type, field) ((LONG)offsetof(type, field))
#define RTL_FIELD_SIZE(type, field) (sizeof(((type*)0)->field))
#define RTL_SIZEOF_THROUGH_FIELD(type, field) (FIELD_OFFSET(type, field) + RTL_FIELD_SIZE(type, field))
#define CONTAINING_RECORD(address, type, field) ((type*)((PCHAR)(address) - (ULONG_PTR)offsetof(type, field)))
#define RTL_NUMBER_OF(a) (sizeof(a) / sizeof((a)[0]))
#define ARRAYSIZE(a) RTL_NUMBER_OF(a)
#define ARGUMENT_PRESENT(p) ((CHAR*)((ULONG_PTR)(p)) != (CHAR*)NULL)
#define UNREFERENCED_PARAMETER(p) ((void)(p))
#define DBG_UNREFERENCED_PARAMETER(p) ((void)(p))
#define DBG_UNREFERENCED_LOCAL_VARIABLE(v) ((void)(v))
#define ALIGN_DOWN_BY(length, alignment) ((ULONG_PTR)(length) & ~((ULONG_PTR)(alignment)-1))
#define ALIGN_UP_BY(length, alignment) (ALIGN_DOWN_BY(((ULONG_PTR)(length) + (alignment)-1), alignment))
#define ALIGN_DOWN_POINTER_BY(address, alignment) ((PVOID)ALIGN_DOWN_BY(address, alignment))
#define ALIGN_UP_POINTER_BY(address, alignment) ((PVOID)ALIGN_UP_BY(address, alignment))
#define ROUND_TO_SIZE(length, alignment) ((((ULONG_PTR)(length)) + ((alignment)-1)) & ~((ULONG_PTR)(alignment)-1))
#define Add2Ptr(p, i) ((PVOID)((PUCHAR)(p) + (i)))
#define PtrOffset(b, o) ((ULONG)((ULONG_PTR)(o) - (ULONG_PTR)(b)))
#define MAXUCHAR 0xff
#define MAXUSHORT 0xffff
#define MAXLONG 0x7fffffff
#define MAXLONGLONG (0x7fffffffffffffffLL)
#define MAXULONG64 (~(ULONG64)0)
#define MAXSIZE_T (~(SIZE_T)0)
#define MAXULONG_PTR (~(ULONG_PTR)0)
#ifdef __cplusplus
#define C_ASSERT(e) static_assert(e, #e)
#else
#define C_ASSERT(e) _Static_assert(e, #e)
#endif
#ifndef __cplusplus
#ifndef NOMINMAX
#ifndef min
#define min(a, b) (((a) < (b)) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) (((a) > (b)) ? (a) : (b))
#endif
#endif
#endif

/* ---- strings ---- */
typedef struct _UNICODE_STRING {
    USHORT Length;        /* bytes, without a terminator */
    USHORT MaximumLength; /* bytes */
    PWCH Buffer;
} UNICODE_STRING, *PUNICODE_STRING;
typedef const UNICODE_STRING* PCUNICODE_STRING;

typedef struct _STRING {
    USHORT Length;
    USHORT MaximumLength;
    PCHAR Buffer;
} STRING, *PSTRING, ANSI_STRING, *PANSI_STRING, OEM_STRING, *POEM_STRING;
typedef const STRING* PCANSI_STRING;

#define RTL_CONSTANT_STRING(s) \
    { (USHORT)(sizeof(s) - sizeof((s)[0])), (USHORT)sizeof(s), (s) }
#define DECLARE_CONST_UNICODE_STRING(name, text) \
    const UNICODE_STRING name = {(USHORT)(sizeof(text) - sizeof(WCHAR)), (USHORT)sizeof(text), (PWCH)(text)}
#define DECLARE_UNICODE_STRING_SIZE(name, size) \
    WCHAR name##_buffer[size];                  \
    UNICODE_STRING name = {0, (USHORT)((size) * sizeof(WCHAR)), name##_buffer}

/* ---- doubly and singly linked lists (the inline helpers live in wdm.h) ---- */
typedef struct _LIST_ENTRY {
    struct _LIST_ENTRY* Flink;
    struct _LIST_ENTRY* Blink;
} LIST_ENTRY, *PLIST_ENTRY;

typedef struct _SINGLE_LIST_ENTRY {
    struct _SINGLE_LIST_ENTRY* Next;
} SINGLE_LIST_ENTRY, *PSINGLE_LIST_ENTRY;

/* ---- object attributes (names only: there is no object manager) ---- */
typedef struct _OBJECT_ATTRIBUTES {
    ULONG Length;
    HANDLE RootDirectory;
    PUNICODE_STRING ObjectName;
    ULONG Attributes;
    PVOID SecurityDescriptor;
    PVOID SecurityQualityOfService;
} OBJECT_ATTRIBUTES, *POBJECT_ATTRIBUTES;
#define OBJ_CASE_INSENSITIVE 0x00000040L
#define OBJ_KERNEL_HANDLE 0x00000200L
#define InitializeObjectAttributes(p, n, a, r, s) \
    do {                                          \
        (p)->Length = sizeof(OBJECT_ATTRIBUTES);  \
        (p)->RootDirectory = (r);                 \
        (p)->Attributes = (a);                    \
        (p)->ObjectName = (n);                    \
        (p)->SecurityDescriptor = (s);            \
        (p)->SecurityQualityOfService = NULL;     \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_NTDEF_H */
