// CRC32c (Castagnoli, reflected polynomial 0x82F63B78; RFC 3720 §B.4), as RFC 5044 §6.1 requires for the MPA
// FPDU. The SSE4.2 CRC32 instruction computes exactly this polynomial; CPUs without it use slicing-by-8.
#include <cstring>

#include "wire/iwarp_wire.h"

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define SOFTNDK_WIRE_HAVE_SSE42 1
#endif

namespace softndk::wire {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // reflected 0x1EDC6F41

struct SlicingTables {
    uint32_t t[8][256];
};

constexpr SlicingTables MakeTables() {
    SlicingTables tables{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t crc = i;
        for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
        tables.t[0][i] = crc;
    }
    for (int k = 1; k < 8; ++k) {
        for (uint32_t i = 0; i < 256; ++i) {
            const uint32_t prev = tables.t[k - 1][i];
            tables.t[k][i] = (prev >> 8) ^ tables.t[0][prev & 0xFF];
        }
    }
    return tables;
}

constexpr SlicingTables kTables = MakeTables();

inline uint32_t LoadLe32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
}

#ifdef SOFTNDK_WIRE_HAVE_SSE42
__attribute__((target("sse4.2"))) uint32_t UpdateSse42(uint32_t state, const uint8_t* p, size_t size) {
    uint32_t crc = state;
    while (size > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
        crc = _mm_crc32_u8(crc, *p++);
        --size;
    }
#if defined(__x86_64__)
    uint64_t crc64 = crc;
    while (size >= 8) {
        uint64_t word;
        std::memcpy(&word, p, sizeof(word));
        crc64 = _mm_crc32_u64(crc64, word);
        p += 8;
        size -= 8;
    }
    crc = static_cast<uint32_t>(crc64);
#endif
    while (size >= 4) {
        uint32_t word;
        std::memcpy(&word, p, sizeof(word));
        crc = _mm_crc32_u32(crc, word);
        p += 4;
        size -= 4;
    }
    while (size > 0) {
        crc = _mm_crc32_u8(crc, *p++);
        --size;
    }
    return crc;
}
#endif

bool DetectHardware() {
#ifdef SOFTNDK_WIRE_HAVE_SSE42
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
#else
    return false;
#endif
}

}  // namespace

uint32_t Crc32cUpdatePortable(uint32_t state, const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    const auto& t = kTables.t;
    uint32_t crc = state;
    while (size >= 8) {
        const uint32_t lo = crc ^ LoadLe32(p);
        const uint32_t hi = LoadLe32(p + 4);
        crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
              t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
        p += 8;
        size -= 8;
    }
    while (size > 0) {
        crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
        --size;
    }
    return crc;
}

bool Crc32cHardwareAvailable() {
    static const bool available = DetectHardware();
    return available;
}

uint32_t Crc32cUpdateHardware(uint32_t state, const void* data, size_t size) {
#ifdef SOFTNDK_WIRE_HAVE_SSE42
    if (Crc32cHardwareAvailable()) return UpdateSse42(state, static_cast<const uint8_t*>(data), size);
#endif
    return Crc32cUpdatePortable(state, data, size);
}

uint32_t Crc32cUpdate(uint32_t state, const void* data, size_t size) {
    if (size == 0) return state;
    return Crc32cUpdateHardware(state, data, size);
}

}  // namespace softndk::wire
