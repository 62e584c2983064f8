// Seed-corpus extraction for the wire fuzzers: reads every capture in a folder, reassembles TCP, and writes each
// MPA frame (to the MPA corpus) and each FPDU plus the post-MPA stream (to the FPDU corpus, CRC selector first).
// Usage: extract_seeds CAPTURE_DIR MPA_CORPUS_DIR FPDU_CORPUS_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/pcap_reader.h"
#include "wire/iwarp_wire.h"

namespace {

using namespace softndk::wire;
namespace fs = std::filesystem;

size_t Write(const fs::path& dir, const std::vector<uint8_t>& bytes) {
    uint64_t hash = 1469598103934665603ull;  // FNV-1a names the file by its content
    for (uint8_t b : bytes) hash = (hash ^ b) * 1099511628211ull;
    char name[32];
    std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(hash));
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s CAPTURE_DIR MPA_CORPUS FPDU_CORPUS\n", argv[0]);
        return 2;
    }
    const fs::path mpa_dir = argv[2], fpdu_dir = argv[3];
    fs::create_directories(mpa_dir);
    fs::create_directories(fpdu_dir);
    size_t mpa_seeds = 0, fpdu_seeds = 0;
    for (const auto& entry : fs::directory_iterator(argv[1])) {
        std::vector<softndk::testing::TcpSegment> segments;
        std::string error;
        if (!softndk::testing::ReadTcpSegments(entry.path().string(), &segments, &error)) continue;
        for (const auto& stream : softndk::testing::ReassembleTcpStreams(segments)) {
            MpaFrame frame;
            ParseResult mpa = ParseMpaFrame(stream.bytes, MpaFrameKind::kRequest, &frame);
            if (mpa.status == WireStatus::kBadMpaKey) mpa = ParseMpaFrame(stream.bytes, MpaFrameKind::kReply, &frame);
            if (!mpa.ok()) continue;
            mpa_seeds += Write(mpa_dir, {stream.bytes.begin(), stream.bytes.begin() + mpa.size});
            // The CRC selector: the synthetic capture is the one with C set on both sides.
            const uint8_t crc = frame.crc ? 1 : 0;
            std::span<const uint8_t> rest = std::span(stream.bytes).subspan(mpa.size);
            std::vector<uint8_t> whole{crc};
            whole.insert(whole.end(), rest.begin(), rest.begin() + std::min<size_t>(rest.size(), 8192));
            fpdu_seeds += Write(fpdu_dir, whole);
            while (!rest.empty()) {
                FpduView view;
                const ParseResult r = ParseFpdu(rest, crc != 0, &view);
                if (r.status == WireStatus::kNeedMoreBytes) break;
                std::vector<uint8_t> one{crc};
                one.insert(one.end(), rest.begin(), rest.begin() + r.size);
                fpdu_seeds += Write(fpdu_dir, one);
                rest = rest.subspan(r.size);
            }
        }
    }
    std::printf("extracted %zu MPA and %zu FPDU seeds\n", mpa_seeds, fpdu_seeds);
    return 0;
}
