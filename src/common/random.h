// Small fast PRNG (splitmix64) for token keys, slot choice, completion-mode mixing and fault injection.
#pragma once

#include <cstdint>
#include <random>

namespace softndk {

class SplitMix64 {
public:
    explicit SplitMix64(uint64_t seed) : state_(seed) {}
    uint64_t Next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, bound); bound > 0.
    uint64_t Below(uint64_t bound) { return Next() % bound; }
    double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

private:
    uint64_t state_;
};

// Seed from the OS when the caller gives 0.
inline uint64_t SeedOrEntropy(uint64_t seed) {
    if (seed != 0) return seed;
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace softndk
