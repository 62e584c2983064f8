#include "mem/token_table.h"

#include <cassert>

#include "mem/token_target.h"

namespace softndk::mem {
namespace {

// Slot word: [0,32) references, [32,40) local key, [40,48) remote key, [48,50) state.
enum State : uint64_t { kFree = 0, kReserved = 1, kPublished = 2, kRetiring = 3 };
constexpr uint64_t kRefMask = 0xFFFFFFFFull;
constexpr uint64_t StateOf(uint64_t word) {
    return (word >> 48) & 3;
}
constexpr uint32_t LocalKey(uint64_t word) {
    return static_cast<uint32_t>((word >> 32) & 0xFF);
}
constexpr uint32_t RemoteKey(uint64_t word) {
    return static_cast<uint32_t>((word >> 40) & 0xFF);
}
constexpr uint64_t Word(uint64_t state, uint32_t local, uint32_t remote, uint64_t refs) {
    return (state << 48) | (static_cast<uint64_t>(remote) << 40) | (static_cast<uint64_t>(local) << 32) | refs;
}
constexpr uint32_t MakeToken(uint32_t index, uint32_t key) {
    return (index << TokenTable::kKeyBits) | key;
}

}  // namespace

struct TokenTable::Chunk {
    Slot slots[kChunkSlots];
    // Issue 33 §4.1: SlotUse of each slot, with kFreedBit once freed; only Diagnose reads it.
    std::atomic<uint8_t> uses[kChunkSlots];
};

namespace {
constexpr uint8_t kFreedBit = 0x80;
SlotUse UseOf(const TokenTarget* target) {
    if (target == nullptr) return SlotUse::kNone;
    if (target->kind == TargetKind::kWindow) return SlotUse::kWindow;
    if (target->kind == TargetKind::kPrivileged) return SlotUse::kPrivileged;
    return target->invalidatable != nullptr ? SlotUse::kFastRegion : SlotUse::kRegion;
}
}  // namespace

std::atomic<uint8_t>* TokenTable::UseSlot(uint32_t index) const {
    Chunk* chunk =
        index == 0 || index >= kMaxSlots ? nullptr : chunks_[index / kChunkSlots].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : &chunk->uses[index % kChunkSlots];
}

TokenTable::Slot* TokenTable::ReservedSlot(uint32_t index) const {
    return &chunks_[index / kChunkSlots].load(std::memory_order_acquire)->slots[index % kChunkSlots];
}

std::atomic<uint8_t>* TokenTable::ReservedUse(uint32_t index) const {
    return &chunks_[index / kChunkSlots].load(std::memory_order_acquire)->uses[index % kChunkSlots];
}

static_assert(TokenSlot::kRetiringWithOneReference == ((uint64_t{kRetiring} << 48) | 1));

void TokenRef::FinishDrain(TokenSlot* slot, uint64_t word) {
    // {retiring, 0 references} is ours alone: Acquire refuses a retiring slot, Retire has run, and Publish
    // needs a reserved one.
    slot->word.store(Word(kReserved, LocalKey(word), RemoteKey(word), 0), std::memory_order_release);
    if (slot->drain_hook != nullptr) slot->drain_hook(slot->drain_context);
}

TokenTable::TokenTable(uint64_t seed, uint32_t max_slots)
    : chunks_(new std::atomic<Chunk*>[kMaxSlots / kChunkSlots]),
      max_slots_(max_slots < kMaxSlots - 1 ? max_slots : kMaxSlots - 1),
      rng_(SeedOrEntropy(seed)) {
    for (uint32_t i = 0; i < kMaxSlots / kChunkSlots; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

TokenTable::~TokenTable() {
    for (uint32_t i = 0; i < kMaxSlots / kChunkSlots; ++i) delete chunks_[i].load(std::memory_order_relaxed);
}

TokenTable::Slot* TokenTable::Find(uint32_t index) const {
    if (index == 0 || index >= kMaxSlots) return nullptr;
    Chunk* chunk = chunks_[index / kChunkSlots].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : &chunk->slots[index % kChunkSlots];
}

NTSTATUS TokenTable::Reserve(uint32_t* index) {
    std::lock_guard lock(mutex_);
    if (live_ >= max_slots_) return STATUS_INSUFFICIENT_RESOURCES;
    // Keep at least a chunk's worth of choice so indices stay unpredictable.
    if (free_.size() < kChunkSlots / 2 && allocated_slots_ < kMaxSlots) {
        uint32_t chunk_index = allocated_slots_ / kChunkSlots;
        chunks_[chunk_index].store(new Chunk(), std::memory_order_release);
        for (uint32_t i = 0; i < kChunkSlots; ++i) {
            uint32_t slot_index = allocated_slots_ + i;
            if (slot_index != 0) free_.push_back(slot_index);  // index 0 never forms a token
        }
        allocated_slots_ += kChunkSlots;
    }
    if (free_.empty()) return STATUS_INSUFFICIENT_RESOURCES;
    size_t pick = rng_.Below(free_.size());
    uint32_t chosen = free_[pick];
    free_[pick] = free_.back();
    free_.pop_back();
    Slot* slot = ReservedSlot(chosen);
    auto local = static_cast<uint32_t>(rng_.Below(256));
    auto remote = static_cast<uint32_t>(rng_.Below(255));
    if (remote >= local) ++remote;  // local and remote keys differ
    ReservedUse(chosen)->store(static_cast<uint8_t>(SlotUse::kNone), std::memory_order_relaxed);
    slot->word.store(Word(kReserved, local, remote, 0), std::memory_order_release);
    ++live_;
    *index = chosen;
    return STATUS_SUCCESS;
}

TokenPair TokenTable::Publish(uint32_t index, TokenTarget* target, TokenPair avoid, bool remember) {
    Slot* slot = ReservedSlot(index);
    const uint64_t old = slot->word.load(std::memory_order_relaxed);
    auto avoided = [&](uint32_t key, uint32_t old_key, uint32_t avoid_token) {
        return key == old_key || MakeToken(index, key) == avoid_token;
    };
    uint32_t local;
    uint32_t remote;
    {
        std::lock_guard lock(mutex_);
        do {
            local = static_cast<uint32_t>(rng_.Below(256));
        } while (avoided(local, LocalKey(old), avoid.local));
        do {
            remote = static_cast<uint32_t>(rng_.Below(256));
        } while (remote == local || avoided(remote, RemoteKey(old), avoid.remote));
    }
    if (remember)
        slot->rotated_keys.store((1u << 16) | (RemoteKey(old) << 8) | LocalKey(old), std::memory_order_relaxed);
    slot->cycle.fetch_add(1, std::memory_order_relaxed);
    slot->target.store(target, std::memory_order_relaxed);
    ReservedUse(index)->store(static_cast<uint8_t>(UseOf(target)), std::memory_order_relaxed);
    slot->word.store(Word(kPublished, local, remote, 0), std::memory_order_release);  // findable from here
    return TokenPair{MakeToken(index, local), MakeToken(index, remote)};
}

TokenPair TokenTable::PublishKeepingKeys(uint32_t index, TokenTarget* target) {
    Slot* slot = ReservedSlot(index);
    const uint64_t old = slot->word.load(std::memory_order_relaxed);
    slot->cycle.fetch_add(1, std::memory_order_relaxed);
    slot->target.store(target, std::memory_order_relaxed);
    ReservedUse(index)->store(static_cast<uint8_t>(UseOf(target)), std::memory_order_relaxed);
    slot->word.store(Word(kPublished, LocalKey(old), RemoteKey(old), 0), std::memory_order_release);
    return TokenPair{MakeToken(index, LocalKey(old)), MakeToken(index, RemoteKey(old))};
}

bool TokenTable::RotatedAway(uint32_t token, uint32_t* cycle) const {
    const Slot* slot = Find(token >> kKeyBits);
    if (slot == nullptr || StateOf(slot->word.load(std::memory_order_acquire)) == kFree) return false;
    const uint32_t rotated = slot->rotated_keys.load(std::memory_order_relaxed);
    const uint32_t key = token & ((1u << kKeyBits) - 1);
    if ((rotated & (1u << 16)) == 0 || (key != (rotated & 0xFF) && key != ((rotated >> 8) & 0xFF))) return false;
    *cycle = slot->cycle.load(std::memory_order_relaxed);
    return true;
}

TokenPair TokenTable::Tokens(uint32_t index) const {
    const Slot* slot = Find(index);
    if (slot == nullptr) return {};
    uint64_t word = slot->word.load(std::memory_order_acquire);
    return TokenPair{MakeToken(index, LocalKey(word)), MakeToken(index, RemoteKey(word))};
}

bool TokenTable::Retire(uint32_t index, DrainHook hook, void* context) {
    Slot* slot = Find(index);
    slot->drain_hook = hook;
    slot->drain_context = context;
    uint64_t word = slot->word.load(std::memory_order_relaxed);
    while (true) {
        uint64_t refs = word & kRefMask;
        uint64_t next = refs == 0 ? Word(kReserved, LocalKey(word), RemoteKey(word), 0)
                                  : Word(kRetiring, LocalKey(word), RemoteKey(word), refs);
        if (slot->word.compare_exchange_weak(word, next, std::memory_order_acq_rel)) return refs == 0;
    }
}

void TokenTable::Free(uint32_t index) {
    Slot* slot = ReservedSlot(index);
    uint64_t word = slot->word.load(std::memory_order_relaxed);
    slot->target.store(nullptr, std::memory_order_relaxed);
    slot->cycle.store(0, std::memory_order_relaxed);
    slot->rotated_keys.store(0, std::memory_order_relaxed);
    std::atomic<uint8_t>* use = ReservedUse(index);
    use->store(use->load(std::memory_order_relaxed) | kFreedBit, std::memory_order_relaxed);
    slot->word.store(Word(kFree, LocalKey(word), RemoteKey(word), 0), std::memory_order_release);
    std::lock_guard lock(mutex_);
    free_.push_back(index);
    --live_;
}

bool TokenTable::Acquire(uint32_t token, TokenKind kind, TokenRef* out) {
    assert(!*out && "Acquire into a grant that still holds a reference would leak it");
    Slot* slot = Find(token >> kKeyBits);
    if (slot == nullptr) return false;
    const uint32_t key = token & 0xFF;
    uint64_t word = slot->word.load(std::memory_order_acquire);
    while (true) {
        if (StateOf(word) != kPublished) return false;
        if ((kind == TokenKind::kLocal ? LocalKey(word) : RemoteKey(word)) != key) return false;
        if ((word & kRefMask) == kRefMask) return false;
        if (slot->word.compare_exchange_weak(word, word + 1, std::memory_order_acquire)) break;
    }
    out->slot_ = slot;
    out->target_ = slot->target.load(std::memory_order_relaxed);
    return true;
}

// Best effort, read after the failed Acquire: the slot may change in between (a refusal is explained, not
// re-decided). The key is compared first: a token of the slot's current keys is explained by the slot's state.
TokenDiagnosis TokenTable::Diagnose(uint32_t token, TokenKind kind) const {
    TokenDiagnosis out{};
    const uint32_t index = token >> kKeyBits;
    const Slot* slot = Find(index);
    if (slot == nullptr) {
        out.reason = TokenRefusal::kUnknown;
        return out;
    }
    const uint64_t word = slot->word.load(std::memory_order_acquire);
    const uint8_t use = UseSlot(index)->load(std::memory_order_relaxed);
    out.use = static_cast<SlotUse>(use & ~kFreedBit);
    const uint32_t key = token & 0xFF;
    const uint32_t mine = kind == TokenKind::kLocal ? LocalKey(word) : RemoteKey(word);
    const uint32_t other = kind == TokenKind::kLocal ? RemoteKey(word) : LocalKey(word);
    const bool current = key == mine || key == other;  // one of the tokens the slot last answered to
    const uint64_t state = StateOf(word);
    if (state == kFree) {
        if ((use & kFreedBit) == 0)
            out.reason = TokenRefusal::kUnknown;  // nothing was ever reserved there
        else
            out.reason = current ? TokenRefusal::kClosed : TokenRefusal::kStaleKey;
        return out;
    }
    out.now = MakeToken(index, mine);
    if (!current) {
        out.reason = RotatedAway(token, &out.cycle) ? TokenRefusal::kRotatedAway : TokenRefusal::kStaleKey;
        return out;
    }
    if (state == kPublished) {
        out.reason = key == other ? TokenRefusal::kWrongKind : TokenRefusal::kBusy;
    } else if (state == kRetiring) {
        out.reason = TokenRefusal::kDraining;
    } else {
        switch (out.use) {  // reserved: what it held before, if anything
            case SlotUse::kNone:
                out.reason = TokenRefusal::kNotRegistered;
                break;
            case SlotUse::kFastRegion:
                out.reason = TokenRefusal::kInvalidated;
                break;
            case SlotUse::kWindow:
                out.reason = TokenRefusal::kWindowNotBound;
                break;
            default:
                out.reason = TokenRefusal::kClosed;
        }
    }
    return out;
}

uint32_t TokenTable::LiveSlots() const {
    std::lock_guard lock(mutex_);
    return live_;
}

uint32_t TokenTable::ReferenceCount(uint32_t index) const {
    const Slot* slot = Find(index);
    return slot == nullptr ? 0 : static_cast<uint32_t>(slot->word.load(std::memory_order_acquire) & kRefMask);
}

}  // namespace softndk::mem
