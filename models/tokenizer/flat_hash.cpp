#include "tokenizer/flat_hash.h"

#include <algorithm>

namespace moetrain::tok {

void PairTable::add(int32_t left, int32_t right, Value v) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const uint64_t k = key(left, right);
    for (size_t i = mix64(k) & mask_;; i = (i + 1) & mask_) {
        Slot& s = slots_[i];
        if (s.key == k) {
            if (v.rank < s.value.rank) s.value = v;
            return;
        }
        if (s.key == kEmpty) {
            s = Slot{k, v};
            ++size_;
            return;
        }
    }
}

void PairTable::grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
        if (s.key == kEmpty) continue;
        size_t i = mix64(s.key) & mask_;
        while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
        slots_[i] = s;
    }
}

namespace {

// memcmp(a, b, n) == 0 for the short keys of the cache, without a library call.
inline bool same_bytes(const void* a, const char* b, size_t n) {
    const auto* pa = static_cast<const char*>(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;
        std::memcpy(&x, pa + i, 8);
        std::memcpy(&y, b + i, 8);
        if (x != y) return false;
    }
    for (; i < n; ++i)
        if (pa[i] != b[i]) return false;
    return true;
}

}  // namespace

const int32_t* PieceCache::find(std::string_view piece, uint64_t hash, uint32_t& n) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
        const Slot& s = slots_[i];
        if (s.hash == 0) return nullptr;
        if (s.hash == hash && s.key_len == piece.size()) {
            const uint32_t* e = arena_.data() + s.offset;
            if (same_bytes(e + s.ids, piece.data(), piece.size())) {
                n = s.ids;
                return reinterpret_cast<const int32_t*>(e);
            }
        }
    }
}

void PieceCache::insert(std::string_view piece, uint64_t hash, const int32_t* ids, uint32_t n) {
    if (piece.size() > kMaxPiece || n > piece.size()) return;
    if (slots_.empty()) slots_.resize(kSlots);
    if (2 * (used_ + 1) > kSlots) clear();
    const auto offset = static_cast<uint32_t>(arena_.size());
    arena_.insert(arena_.end(), reinterpret_cast<const uint32_t*>(ids),
                  reinterpret_cast<const uint32_t*>(ids) + n);
    const size_t words = (piece.size() + 3) / 4;
    arena_.resize(arena_.size() + words, 0);
    std::memcpy(arena_.data() + offset + n, piece.data(), piece.size());
    size_t i = hash & (kSlots - 1);
    while (slots_[i].hash != 0) i = (i + 1) & (kSlots - 1);
    slots_[i] = Slot{hash, offset, static_cast<uint8_t>(piece.size()), static_cast<uint8_t>(n)};
    ++used_;
}

void PieceCache::clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    arena_.clear();
    used_ = 0;
}

}  // namespace moetrain::tok
