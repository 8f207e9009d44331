// Small open-addressing hash tables for the encoder's hot lookups (the merge pairs of a BPE and
// each thread's cache of encoded pieces): one flat array probed linearly, no node per entry, so
// a lookup costs one or two cache misses where std::unordered_map costs several.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace moetrain::tok {

// A 64-bit mix (the SplitMix64 finalizer).
inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Hash of a short byte string, never 0 (0 marks an empty slot).
inline uint64_t bytes_hash(std::string_view s) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        h = mix64(h ^ w);
    }
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    return mix64(h ^ w) | 1;
}

// (left id, right id) -> (rank, merged id) of a BPE's merges.
class PairTable {
  public:
    struct Value {
        int32_t rank, merged;
    };
    // Keeps the lower rank when a pair is added twice.
    void add(int32_t left, int32_t right, Value v);
    const Value* find(int32_t left, int32_t right) const {
        const uint64_t k = key(left, right);
        for (size_t i = mix64(k) & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.key == k) return &s.value;
            if (s.key == kEmpty) return nullptr;
        }
    }
    size_t size() const { return size_; }

  private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are below 2^31: never a real key
    struct Slot {
        uint64_t key = kEmpty;
        Value value{};
    };
    static uint64_t key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }
    void grow();
    std::vector<Slot> slots_ = std::vector<Slot>(16);
    size_t mask_ = 15, size_ = 0;
};

// Each thread's memo of the ids of short pieces it has encoded: the piece's bytes and ids
// live together in an arena; the table is emptied when half full.
class PieceCache {
  public:
    static constexpr size_t kMaxPiece = 24;  // longer pieces are not cached
    // The ids of `piece` (n set), or nullptr.
    const int32_t* find(std::string_view piece, uint64_t hash, uint32_t& n) const;
    void insert(std::string_view piece, uint64_t hash, const int32_t* ids, uint32_t n);
    void clear();
    uint64_t owner = 0;  // the tokenizer instance the entries belong to

  private:
    struct Slot {
        uint64_t hash = 0;  // 0 = empty
        uint32_t offset = 0;
        uint8_t key_len = 0, ids = 0;
    };
    static constexpr size_t kSlots = size_t{1} << 18;
    std::vector<Slot> slots_;
    std::vector<uint32_t> arena_;  // per entry: its ids, then its bytes padded to 4
    size_t used_ = 0;
};

}  // namespace moetrain::tok
