// CRC32c: RFC 3720 §B.4 test vectors, the hardware and portable paths agree, incremental use, trailer order.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "wire/iwarp_wire.h"

namespace softndk::wire {
namespace {

struct Vector {
    const char* name;
    std::vector<uint8_t> data;
    uint32_t crc;
};

std::vector<Vector> Rfc3720Vectors() {
    std::vector<uint8_t> inc(32), dec(32);
    std::iota(inc.begin(), inc.end(), 0);
    for (int i = 0; i < 32; ++i) dec[i] = static_cast<uint8_t>(31 - i);
    // RFC 3720 §B.4: the iSCSI SCSI Read (10) command PDU.
    std::vector<uint8_t> read_pdu = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                     0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                                     0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                                     0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    return {
        {"32 zeros", std::vector<uint8_t>(32, 0x00), 0x8A9136AAu},
        {"32 ones", std::vector<uint8_t>(32, 0xFF), 0x62A8AB43u},
        {"incrementing", inc, 0x46DD794Eu},
        {"decrementing", dec, 0x113FDB5Cu},
        {"iSCSI read PDU", read_pdu, 0xD9963A56u},
        {"123456789", {'1', '2', '3', '4', '5', '6', '7', '8', '9'}, 0xE3069283u},
    };
}

TEST(WireCrc32cTest, Rfc3720VectorsMatchOnEveryImplementation) {
    for (const Vector& v : Rfc3720Vectors()) {
        EXPECT_EQ(Crc32c(v.data.data(), v.data.size()), v.crc) << v.name;
        EXPECT_EQ(Crc32cFinalize(Crc32cUpdatePortable(kCrc32cInit, v.data.data(), v.data.size())), v.crc) << v.name;
        EXPECT_EQ(Crc32cFinalize(Crc32cUpdateHardware(kCrc32cInit, v.data.data(), v.data.size())), v.crc) << v.name;
    }
}

TEST(WireCrc32cTest, EmptyInputLeavesTheStateAlone) {
    EXPECT_EQ(Crc32cUpdate(0x12345678u, nullptr, 0), 0x12345678u);
    EXPECT_EQ(Crc32c(nullptr, 0), 0u);
}

TEST(WireCrc32cTest, HardwareAndPortableAgreeOnEveryLengthAndAlignment) {
    std::mt19937 rng(7);
    std::vector<uint8_t> buffer(600);
    for (auto& b : buffer) b = static_cast<uint8_t>(rng());
    for (size_t offset = 0; offset < 8; ++offset) {
        for (size_t length = 0; length + offset <= 560; length += (length < 40 ? 1 : 37)) {
            const uint8_t* p = buffer.data() + offset;
            ASSERT_EQ(Crc32cUpdateHardware(kCrc32cInit, p, length), Crc32cUpdatePortable(kCrc32cInit, p, length))
                << "offset " << offset << " length " << length;
        }
    }
}

TEST(WireCrc32cTest, IncrementalUpdatesEqualOneShotAtEverySplit) {
    const std::vector<uint8_t> data = Rfc3720Vectors()[4].data;
    for (size_t split = 0; split <= data.size(); ++split) {
        uint32_t state = Crc32cUpdate(kCrc32cInit, data.data(), split);
        state = Crc32cUpdate(state, data.data() + split, data.size() - split);
        EXPECT_EQ(Crc32cFinalize(state), 0xD9963A56u) << "split " << split;
    }
}

TEST(WireCrc32cTest, TrailerIsStoredLeastSignificantByteFirst) {
    // siw-on-the-wire §5 and §7: the value 0x2b9a3c11 goes on the wire as 11 3c 9a 2b.
    uint8_t trailer[4];
    StoreCrcTrailer(0x2b9a3c11u, trailer);
    EXPECT_EQ(trailer[0], 0x11);
    EXPECT_EQ(trailer[1], 0x3c);
    EXPECT_EQ(trailer[2], 0x9a);
    EXPECT_EQ(trailer[3], 0x2b);
    EXPECT_EQ(LoadCrcTrailer(trailer), 0x2b9a3c11u);
}

TEST(WireCrc32cTest, ReportsWhetherTheCpuHasSse42) {
#if defined(__x86_64__)
    EXPECT_EQ(Crc32cHardwareAvailable(), static_cast<bool>(__builtin_cpu_supports("sse4.2")));
#else
    EXPECT_FALSE(Crc32cHardwareAvailable());
#endif
}

}  // namespace
}  // namespace softndk::wire
