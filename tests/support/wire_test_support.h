// Helpers for the wire-layer tests.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "wire/iwarp_wire.h"

namespace softndk::wire {

// The serialised DDP/RDMAP header of `h`, checked to be exactly SegmentHeaderSize long.
inline std::vector<uint8_t> HeaderBytes(const SegmentHeader& h) {
    std::vector<uint8_t> bytes(SegmentHeaderSize(h.opcode));
    size_t written = 0;
    EXPECT_EQ(SerializeSegmentHeader(h, bytes, &written), WireStatus::kOk);
    EXPECT_EQ(written, bytes.size());
    return bytes;
}

}  // namespace softndk::wire
