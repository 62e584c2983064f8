// Strict flag values for the C++ tools (issue 20 §1): a bad value names the flag and the accepted range and
// exits 2; sizes take k/K/KiB, m/M/MiB and g/G/GiB as perftest does (powers of 1024); lists are checked item by
// item. Nothing here throws.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace ndktools {

[[noreturn]] inline void BadValue(const char* tool, const std::string& flag, const std::string& text,
                                  const std::string& accepted) {
    std::fprintf(stderr, "%s: %s: \"%s\" is not %s; see %s --help\n", tool, flag.c_str(), text.c_str(),
                 accepted.c_str(), tool);
    std::exit(2);
}

// A whole number in [low, high], decimal.
inline uint64_t ParseCount(const char* tool, const std::string& flag, const std::string& text, uint64_t low,
                           uint64_t high) {
    const std::string accepted = "a whole number from " + std::to_string(low) + " to " + std::to_string(high);
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) BadValue(tool, flag, text, accepted);
    errno = 0;
    const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
    if (errno == ERANGE || value < low || value > high) BadValue(tool, flag, text, accepted);
    return value;
}

// A byte count with an optional unit (k, K, KiB, m, M, MiB, g, G, GiB: 1024-based, as perftest), in [low, high].
inline uint64_t ParseSize(const char* tool, const std::string& flag, const std::string& text, uint64_t low,
                          uint64_t high) {
    const std::string accepted = "a size from " + std::to_string(low) + " to " + std::to_string(high) +
                                 " bytes (units k/K/KiB, m/M/MiB, g/G/GiB)";
    const size_t digits = text.find_first_not_of("0123456789");
    if (digits == 0 || text.empty()) BadValue(tool, flag, text, accepted);
    const std::string unit = digits == std::string::npos ? "" : text.substr(digits);
    uint64_t scale = 1;
    if (unit == "k" || unit == "K" || unit == "KiB") {
        scale = 1ull << 10;
    } else if (unit == "m" || unit == "M" || unit == "MiB") {
        scale = 1ull << 20;
    } else if (unit == "g" || unit == "G" || unit == "GiB") {
        scale = 1ull << 30;
    } else if (!unit.empty()) {
        BadValue(tool, flag, text, accepted);
    }
    errno = 0;
    const unsigned long long number = std::strtoull(text.substr(0, digits).c_str(), nullptr, 10);
    if (errno == ERANGE || number > high / scale || number * scale < low || number * scale > high)
        BadValue(tool, flag, text, accepted);
    return number * scale;
}

// Seconds, a finite decimal in [low, high].
inline double ParseSeconds(const char* tool, const std::string& flag, const std::string& text, double low,
                           double high) {
    char buffer[96];
    std::snprintf(buffer, sizeof(buffer), "a number of seconds from %g to %g", low, high);
    char* end = nullptr;
    errno = 0;
    const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
    if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE || !std::isfinite(value) || value < low ||
        value > high)
        BadValue(tool, flag, text, buffer);
    return value;
}

// A comma-separated list of sizes, each checked as ParseSize checks one.
inline std::vector<size_t> ParseSizeList(const char* tool, const std::string& flag, const std::string& text,
                                         uint64_t low, uint64_t high) {
    std::vector<size_t> sizes;
    size_t pos = 0;
    do {
        const size_t comma = text.find(',', pos);
        const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        sizes.push_back(static_cast<size_t>(ParseSize(tool, flag, item, low, high)));
        pos = comma == std::string::npos ? std::string::npos : comma + 1;
    } while (pos != std::string::npos);
    return sizes;
}

}  // namespace ndktools
