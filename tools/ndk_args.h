/* Strict flag values for every tool, C and C++ (issue 20 §1): a bad value names the flag and the accepted range
 * and exits 2; sizes take k/K/KiB, m/M/MiB and g/G/GiB as perftest does (powers of 1024). Nothing here throws. */
#ifndef SOFTNDK_TOOLS_NDK_ARGS_H
#define SOFTNDK_TOOLS_NDK_ARGS_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `hint`: an extra sentence (or NULL), e.g. rping's habits in ndkping's native mode. */
__attribute__((noreturn)) static inline void ndk_bad_value(const char* tool, const char* flag, const char* text,
                                                           const char* accepted, const char* hint) {
    fprintf(stderr, "%s: %s: \"%s\" is not %s; %s%ssee %s --help\n", tool, flag, text, accepted, hint ? hint : "",
            hint ? "; " : "", tool);
    exit(2);
}

static inline int ndk_all_digits(const char* text, size_t length) {
    if (length == 0) return 0;
    for (size_t i = 0; i < length; ++i)
        if (text[i] < '0' || text[i] > '9') return 0;
    return 1;
}

/* A whole number in [low, high], decimal. */
static inline uint64_t ndk_parse_count(const char* tool, const char* flag, const char* text, uint64_t low,
                                       uint64_t high, const char* hint) {
    char accepted[96];
    snprintf(accepted, sizeof(accepted), "a whole number from %llu to %llu", (unsigned long long)low,
             (unsigned long long)high);
    if (!ndk_all_digits(text, strlen(text))) ndk_bad_value(tool, flag, text, accepted, hint);
    errno = 0;
    const unsigned long long value = strtoull(text, NULL, 10);
    if (errno == ERANGE || value < low || value > high) ndk_bad_value(tool, flag, text, accepted, hint);
    return value;
}

/* A byte count with an optional unit (k, K, KiB, m, M, MiB, g, G, GiB: 1024-based, as perftest), in [low, high]. */
static inline uint64_t ndk_parse_size(const char* tool, const char* flag, const char* text, uint64_t low, uint64_t high,
                                      const char* hint) {
    char accepted[128];
    snprintf(accepted, sizeof(accepted), "a size from %llu to %llu bytes (units k/K/KiB, m/M/MiB, g/G/GiB)",
             (unsigned long long)low, (unsigned long long)high);
    const size_t digits = strspn(text, "0123456789");
    const char* unit = text + digits;
    uint64_t scale = 1;
    if (strcmp(unit, "k") == 0 || strcmp(unit, "K") == 0 || strcmp(unit, "KiB") == 0)
        scale = 1ull << 10;
    else if (strcmp(unit, "m") == 0 || strcmp(unit, "M") == 0 || strcmp(unit, "MiB") == 0)
        scale = 1ull << 20;
    else if (strcmp(unit, "g") == 0 || strcmp(unit, "G") == 0 || strcmp(unit, "GiB") == 0)
        scale = 1ull << 30;
    else if (*unit != '\0')
        ndk_bad_value(tool, flag, text, accepted, hint);
    if (digits == 0) ndk_bad_value(tool, flag, text, accepted, hint);
    errno = 0;
    const unsigned long long number = strtoull(text, NULL, 10);
    if (errno == ERANGE || number > high / scale || number * scale < low || number * scale > high)
        ndk_bad_value(tool, flag, text, accepted, hint);
    return number * scale;
}

/* Seconds, a finite decimal in [low, high]. */
static inline double ndk_parse_seconds(const char* tool, const char* flag, const char* text, double low, double high,
                                       const char* hint) {
    char accepted[96];
    snprintf(accepted, sizeof(accepted), "a number of seconds from %g to %g", low, high);
    char* end = NULL;
    errno = 0;
    const double value = *text == '\0' ? NAN : strtod(text, &end);
    if (*text == '\0' || end == NULL || *end != '\0' || errno == ERANGE || !isfinite(value) || value < low ||
        value > high)
        ndk_bad_value(tool, flag, text, accepted, hint);
    return value;
}

#endif
