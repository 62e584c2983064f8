// Wire fault injection (issue 7 §5): what a real network does to a stream, on demand. Counters are per
// connection and count the bytes and FPDUs this side sends.
#pragma once

#include <cstdint>

namespace softndk::transport {

struct WireFaults {
    uint64_t drop_after_bytes = 0;   // reset the connection once this many bytes are out (0: never)
    uint64_t drop_after_fpdus = 0;   // reset it once this many FPDUs are out (0: never)
    uint64_t corrupt_byte = 0;       // flip the bits of outbound stream byte N, counted from 1 (0: never)
    uint64_t stall_after_bytes = 0;  // send nothing more once this many bytes are out (0: never)
    uint32_t delay_us = 0;           // wait this long before each send
    bool any() const {
        return drop_after_bytes != 0 || drop_after_fpdus != 0 || corrupt_byte != 0 || stall_after_bytes != 0 ||
               delay_us != 0;
    }
};

}  // namespace softndk::transport
