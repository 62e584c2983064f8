/* softndk kernel layer — ntstrsafe.h: bounded string formatting and copying (issue 9 §2). Like the WDK's, these
 * are header functions. Truncation returns STATUS_BUFFER_OVERFLOW with a terminated buffer; a zero size or a
 * size above NTSTRSAFE_MAX_CCH is STATUS_INVALID_PARAMETER. W variants use WCHAR = wchar_t. */
#ifndef SOFTNDK_KM_NTSTRSAFE_H
#define SOFTNDK_KM_NTSTRSAFE_H

#include <stdio.h>
#include <softndk/km/ntdef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NTSTRSAFE_MAX_CCH 2147483647
#define NTSTRSAFE_UNICODE_STRING_MAX_CCH 32767

static inline NTSTATUS RtlStringCchVPrintfA(PSTR Dest, size_t Cch, PCSTR Format, va_list Args) {
    if (Dest == NULL || Cch == 0 || Cch > NTSTRSAFE_MAX_CCH) return STATUS_INVALID_PARAMETER;
    int written = vsnprintf(Dest, Cch, Format, Args);
    if (written < 0) {
        Dest[0] = '\0';
        return STATUS_INVALID_PARAMETER;
    }
    return (size_t)written >= Cch ? STATUS_BUFFER_OVERFLOW : STATUS_SUCCESS;
}
static inline NTSTATUS RtlStringCbVPrintfA(PSTR Dest, size_t Cb, PCSTR Format, va_list Args) {
    return RtlStringCchVPrintfA(Dest, Cb, Format, Args);
}
static inline __attribute__((format(printf, 3, 4))) NTSTATUS RtlStringCchPrintfA(PSTR Dest, size_t Cch, PCSTR Format,
                                                                                 ...) {
    va_list args;
    va_start(args, Format);
    NTSTATUS status = RtlStringCchVPrintfA(Dest, Cch, Format, args);
    va_end(args);
    return status;
}
static inline __attribute__((format(printf, 3, 4))) NTSTATUS RtlStringCbPrintfA(PSTR Dest, size_t Cb, PCSTR Format,
                                                                                ...) {
    va_list args;
    va_start(args, Format);
    NTSTATUS status = RtlStringCchVPrintfA(Dest, Cb, Format, args);
    va_end(args);
    return status;
}
static inline NTSTATUS RtlStringCchVPrintfW(PWSTR Dest, size_t Cch, PCWSTR Format, va_list Args) {
    if (Dest == NULL || Cch == 0 || Cch > NTSTRSAFE_MAX_CCH) return STATUS_INVALID_PARAMETER;
    int written = vswprintf(Dest, Cch, Format, Args);
    Dest[Cch - 1] = L'\0';
    return written < 0 ? STATUS_BUFFER_OVERFLOW : STATUS_SUCCESS; /* vswprintf fails on truncation */
}
static inline NTSTATUS RtlStringCchPrintfW(PWSTR Dest, size_t Cch, PCWSTR Format, ...) {
    va_list args;
    va_start(args, Format);
    NTSTATUS status = RtlStringCchVPrintfW(Dest, Cch, Format, args);
    va_end(args);
    return status;
}
static inline NTSTATUS RtlStringCbPrintfW(PWSTR Dest, size_t Cb, PCWSTR Format, ...) {
    va_list args;
    va_start(args, Format);
    NTSTATUS status = RtlStringCchVPrintfW(Dest, Cb / sizeof(WCHAR), Format, args);
    va_end(args);
    return status;
}
static inline NTSTATUS RtlStringCchCopyA(PSTR Dest, size_t Cch, PCSTR Src) {
    if (Dest == NULL || Cch == 0 || Cch > NTSTRSAFE_MAX_CCH) return STATUS_INVALID_PARAMETER;
    size_t i = 0;
    for (; i + 1 < Cch && Src[i] != '\0'; ++i) Dest[i] = Src[i];
    Dest[i] = '\0';
    return Src[i] == '\0' ? STATUS_SUCCESS : STATUS_BUFFER_OVERFLOW;
}
static inline NTSTATUS RtlStringCbCopyA(PSTR Dest, size_t Cb, PCSTR Src) {
    return RtlStringCchCopyA(Dest, Cb, Src);
}
static inline NTSTATUS RtlStringCchCopyW(PWSTR Dest, size_t Cch, PCWSTR Src) {
    if (Dest == NULL || Cch == 0 || Cch > NTSTRSAFE_MAX_CCH) return STATUS_INVALID_PARAMETER;
    size_t i = 0;
    for (; i + 1 < Cch && Src[i] != L'\0'; ++i) Dest[i] = Src[i];
    Dest[i] = L'\0';
    return Src[i] == L'\0' ? STATUS_SUCCESS : STATUS_BUFFER_OVERFLOW;
}
static inline NTSTATUS RtlStringCbCopyW(PWSTR Dest, size_t Cb, PCWSTR Src) {
    return RtlStringCchCopyW(Dest, Cb / sizeof(WCHAR), Src);
}
static inline NTSTATUS RtlStringCchLengthA(PCSTR Psz, size_t CchMax, size_t* Length) {
    if (Psz == NULL || CchMax > NTSTRSAFE_MAX_CCH) return STATUS_INVALID_PARAMETER;
    size_t n = 0; /* strnlen is POSIX, not C11 (issue 19 §1: the header compiles as strict C11) */
    while (n < CchMax && Psz[n] != '\0') ++n;
    if (Length != NULL) *Length = n == CchMax ? 0 : n;
    return n == CchMax ? STATUS_INVALID_PARAMETER : STATUS_SUCCESS;
}
static inline NTSTATUS RtlStringCbLengthA(PCSTR Psz, size_t CbMax, size_t* Length) {
    return RtlStringCchLengthA(Psz, CbMax, Length);
}
static inline NTSTATUS RtlStringCchLengthW(PCWSTR Psz, size_t CchMax, size_t* Length) {
    if (Psz == NULL || CchMax > NTSTRSAFE_MAX_CCH) return STATUS_INVALID_PARAMETER;
    size_t n = 0;
    while (n < CchMax && Psz[n] != L'\0') ++n;
    if (Length != NULL) *Length = n == CchMax ? 0 : n;
    return n == CchMax ? STATUS_INVALID_PARAMETER : STATUS_SUCCESS;
}
static inline NTSTATUS RtlStringCbLengthW(PCWSTR Psz, size_t CbMax, size_t* Length) {
    size_t cch = 0;
    NTSTATUS status = RtlStringCchLengthW(Psz, CbMax / sizeof(WCHAR), &cch);
    if (Length != NULL) *Length = cch * sizeof(WCHAR);
    return status;
}
static inline NTSTATUS RtlStringCchCatA(PSTR Dest, size_t Cch, PCSTR Src) {
    if (Dest == NULL || Cch == 0 || Cch > NTSTRSAFE_MAX_CCH) return STATUS_INVALID_PARAMETER;
    size_t used = 0;
    while (used < Cch && Dest[used] != '\0') ++used;
    if (used == Cch) return STATUS_INVALID_PARAMETER;
    return RtlStringCchCopyA(Dest + used, Cch - used, Src);
}
static inline NTSTATUS RtlStringCbCatA(PSTR Dest, size_t Cb, PCSTR Src) {
    return RtlStringCchCatA(Dest, Cb, Src);
}

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_NTSTRSAFE_H */
