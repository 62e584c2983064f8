// Byte movement for the engine: lists of host pieces built from access-checked SGEs or token ranges, and a
// copy between two lists. The references in a list keep the registrations alive until the copy is done.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mem/access_check.h"

namespace softndk::engine {

struct Piece {
    uint8_t* data;
    uint64_t length;
};

class PieceList {
public:
    void Clear() {
        pieces_.clear();
        grants_.clear();
        total_ = 0;
    }
    void Add(uint8_t* data, uint64_t length) {
        if (length == 0) return;
        pieces_.push_back(Piece{data, length});
        total_ += length;
    }
    // The pieces of [address, address + length) of a target that passed the access check.
    void AddRange(mem::TokenRef grant, uint64_t address, uint64_t length) {
        mem::ForEachPiece(*grant.target(), address, length,
                          [this](uint8_t* data, uint64_t bytes) { Add(data, bytes); });
        grants_.push_back(std::move(grant));
    }
    const std::vector<Piece>& pieces() const { return pieces_; }
    uint64_t total() const { return total_; }

private:
    std::vector<Piece> pieces_;
    std::vector<mem::TokenRef> grants_;
    uint64_t total_ = 0;
};

// Copies min(from.total(), to.total()) bytes; returns the count.
inline uint64_t CopyPieces(const PieceList& from, const PieceList& to) {
    const std::vector<Piece>& source = from.pieces();
    const std::vector<Piece>& sink = to.pieces();
    size_t s = 0, d = 0;
    uint64_t s_off = 0, d_off = 0, copied = 0;
    while (s < source.size() && d < sink.size()) {
        const uint64_t bytes = std::min(source[s].length - s_off, sink[d].length - d_off);
        std::memcpy(sink[d].data + d_off, source[s].data + s_off, bytes);
        copied += bytes;
        s_off += bytes;
        d_off += bytes;
        if (s_off == source[s].length) ++s, s_off = 0;
        if (d_off == sink[d].length) ++d, d_off = 0;
    }
    return copied;
}

}  // namespace softndk::engine
