// Token table (docs/architecture.md, "Memory"): a token is a 24-bit slot index and an 8-bit key, both random. A slot
// carries a local and a remote key so the two tokens of one registration differ. Looking a token up and taking a
// reference is one atomic step on the slot word; a stale key or a retired slot fails. A slot is findable only
// once Publish() has stored its (fully built) target.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <softndk/ndkpi.h>

#include "common/random.h"

namespace softndk::mem {

enum class TokenKind : uint8_t { kLocal, kRemote };

class TokenTable;

// What a slot points at (an MR registration, an MW binding or a PD's privileged mapping). Owned elsewhere;
// valid while the slot is published or draining.
struct TokenTarget;

// One slot. Word: [0,32) references, [32,40) local key, [40,48) remote key, [48,50) state (token_table.cpp).
struct TokenSlot {
    static constexpr uint64_t kStateAndReferences = (uint64_t{3} << 48) | 0xFFFFFFFFull;
    static constexpr uint64_t kRetiringWithOneReference = (uint64_t{3} << 48) | 1;
    std::atomic<uint64_t> word{0};
    std::atomic<TokenTarget*> target{nullptr};
    void (*drain_hook)(void* context) = nullptr;
    void* drain_context = nullptr;
    // Issue 19 §2: how often the slot was published, and the keys it answered to before the last rotation
    // ([0,8) local, [8,16) remote, bit 16 set when there are some), so a stale token can be named.
    std::atomic<uint32_t> cycle{0};
    std::atomic<uint32_t> rotated_keys{0};
};

// A counted reference taken by Acquire(); releasing the last reference of a retired slot runs its drain hook.
class TokenRef {
public:
    TokenRef() = default;
    TokenRef(TokenRef&& other) noexcept : slot_(other.slot_), target_(other.target_) { other.slot_ = nullptr; }
    TokenRef& operator=(TokenRef&& other) noexcept {
        if (this != &other) {
            Reset();
            slot_ = other.slot_;
            target_ = other.target_;
            other.slot_ = nullptr;
        }
        return *this;
    }
    TokenRef(const TokenRef&) = delete;
    TokenRef& operator=(const TokenRef&) = delete;
    ~TokenRef() { Reset(); }

    explicit operator bool() const { return slot_ != nullptr; }
    TokenTarget* target() const { return target_; }
    // Inline: it runs for every SGE of every request. One locked add; the state bits are not touched by it.
    void Reset() {
        if (slot_ == nullptr) return;
        const uint64_t before = slot_->word.fetch_sub(1, std::memory_order_acq_rel);
        if ((before & TokenSlot::kStateAndReferences) == TokenSlot::kRetiringWithOneReference)
            FinishDrain(slot_, before);
        slot_ = nullptr;
        target_ = nullptr;
    }

private:
    friend class TokenTable;
    // The last reference of a retiring slot has gone: the slot is reserved again and the drain hook runs.
    static void FinishDrain(TokenSlot* slot, uint64_t word);
    TokenRef(TokenSlot* slot, TokenTarget* target) : slot_(slot), target_(target) {}
    TokenSlot* slot_ = nullptr;  // the referenced slot: a release needs no lookup
    TokenTarget* target_ = nullptr;
};

// Why a token failed Acquire, as far as the table can tell (issue 33 §4.1: a refusal names it).
enum class TokenRefusal : uint8_t {
    kNone,
    kUnknown,         // no slot at that index, or nothing was ever issued there
    kWrongKind,       // the slot's other current key: a local token used as a remote one or the reverse
    kStaleKey,        // not a key the slot answers to now: invalidated and re-bound, re-registered, slot reused
    kRotatedAway,     // a fast-register MR's key before its last NdkFastRegister (rotating keys)
    kClosed,          // the MR, MW or PD that held it was deregistered or closed
    kNotRegistered,   // issued for a fast-register MR not registered yet
    kInvalidated,     // its fast-register MR was invalidated
    kWindowNotBound,  // its memory window is not bound (invalidated)
    kDraining,        // its MR or MW is being invalidated or deregistered
    kBusy,            // the reference count is full
};
// What the slot last held: kept across its retirement and free, cleared when it is reserved again.
enum class SlotUse : uint8_t { kNone, kRegion, kFastRegion, kWindow, kPrivileged };
// No initialisers (see AccessRefusal): value-initialise one, `TokenDiagnosis d{}`.
struct TokenDiagnosis {
    TokenRefusal reason;
    SlotUse use;
    uint32_t now;    // the token of that kind the slot answers to now (0: none, the slot is free)
    uint32_t cycle;  // kRotatedAway: the MR's registration count
};

struct TokenPair {
    uint32_t local = 0;
    uint32_t remote = 0;
};

class TokenTable {
public:
    static constexpr uint32_t kKeyBits = 8;
    static constexpr uint32_t kIndexBits = 24;
    static constexpr uint32_t kChunkSlots = 4096;
    static constexpr uint32_t kMaxSlots = 1u << kIndexBits;

    using DrainHook = decltype(TokenSlot::drain_hook);

    // seed 0 = from the OS. max_slots caps live slots (MaxMrCount-style limit).
    explicit TokenTable(uint64_t seed, uint32_t max_slots = kMaxSlots);
    ~TokenTable();
    TokenTable(const TokenTable&) = delete;
    TokenTable& operator=(const TokenTable&) = delete;

    // Takes a random free slot in the reserved (not findable) state. STATUS_INSUFFICIENT_RESOURCES when full.
    NTSTATUS Reserve(uint32_t* index);
    // Makes the slot findable with fresh keys: never the slot's previous keys, never the tokens in `avoid`
    // (the owner's previous tokens). The target must be complete. `remember` keeps the keys rotated away for
    // RotatedAway (a fast-register MR that rotates its keys).
    TokenPair Publish(uint32_t index, TokenTarget* target, TokenPair avoid = {}, bool remember = false);
    // Makes the slot findable with the keys it has now (reserved or last published): a fast-register MR's tokens
    // stay those read after NdkInitializeFastRegisterMr (issue 19 §2, AMB-39).
    TokenPair PublishKeepingKeys(uint32_t index, TokenTarget* target);
    // True when `token` is a key its slot answered to before its last rotation (a stale fast-register token);
    // `*cycle` is then the slot's current publication count.
    bool RotatedAway(uint32_t token, uint32_t* cycle) const;
    // Tokens the slot answers to now (also while reserved: TOK-01/02 for an initialised fast MR).
    TokenPair Tokens(uint32_t index) const;
    // Stops new lookups. If no reference is held, returns true and the slot is reserved again at once;
    // otherwise returns false and `hook(context)` runs when the last reference is released.
    bool Retire(uint32_t index, DrainHook hook, void* context);
    // Returns a reserved slot to the free pool.
    void Free(uint32_t index);

    // One atomic step: match the key of a published slot and take a reference. Empty on any mismatch.
    TokenRef Acquire(uint32_t token, TokenKind kind) {
        TokenRef ref;
        Acquire(token, kind, &ref);
        return ref;
    }
    // The same into `*out`, which must be empty: its fields are stored where the caller reads them, with no
    // temporary between (a 16-byte copy of two fresh 8-byte stores stalls store forwarding on the data path).
    bool Acquire(uint32_t token, TokenKind kind, TokenRef* out);

    // After a failed Acquire: why, read from the slot now (issue 33 §4.1). Not on the data path; takes no lock.
    TokenDiagnosis Diagnose(uint32_t token, TokenKind kind) const;

    uint32_t LiveSlots() const;
    // References currently held on a slot (tests).
    uint32_t ReferenceCount(uint32_t index) const;

private:
    friend class TokenRef;
    using Slot = TokenSlot;
    struct Chunk;
    Slot* Find(uint32_t index) const;
    std::atomic<uint8_t>* UseSlot(uint32_t index) const;  // the slot's SlotUse byte (Diagnose)
    // A reserved index's slot and SlotUse byte: its chunk exists, so no null check (GCC's -O3 stringop-overflow
    // warning reads the null branch of Find as a write into nothing).
    Slot* ReservedSlot(uint32_t index) const;
    std::atomic<uint8_t>* ReservedUse(uint32_t index) const;

    std::unique_ptr<std::atomic<Chunk*>[]> chunks_;
    uint32_t max_slots_;
    mutable std::mutex mutex_;  // guards the free pool, chunk growth and the RNG; never taken by Acquire
    std::vector<uint32_t> free_;
    uint32_t allocated_slots_ = 0;
    uint32_t live_ = 0;
    SplitMix64 rng_;
};

}  // namespace softndk::mem
