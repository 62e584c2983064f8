// Strict flag values for the C++ tools (issue 20 §1): std::string forms of ndk_args.h, and lists checked item by
// item. Nothing here throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ndk_args.h"

namespace ndktools {

[[noreturn]] inline void BadValue(const char* tool, const std::string& flag, const std::string& text,
                                  const std::string& accepted) {
    ndk_bad_value(tool, flag.c_str(), text.c_str(), accepted.c_str(), nullptr);
    std::exit(2);  // ndk_bad_value does not return
}

inline uint64_t ParseCount(const char* tool, const std::string& flag, const std::string& text, uint64_t low,
                           uint64_t high) {
    return ndk_parse_count(tool, flag.c_str(), text.c_str(), low, high, nullptr);
}

inline uint64_t ParseSize(const char* tool, const std::string& flag, const std::string& text, uint64_t low,
                          uint64_t high) {
    return ndk_parse_size(tool, flag.c_str(), text.c_str(), low, high, nullptr);
}

inline double ParseSeconds(const char* tool, const std::string& flag, const std::string& text, double low,
                           double high) {
    return ndk_parse_seconds(tool, flag.c_str(), text.c_str(), low, high, nullptr);
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
