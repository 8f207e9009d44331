// Byte-pair encoding by merge rank, shared by the Hugging Face byte-level BPE and tiktoken:
// a piece starts as one token per byte; the adjacent pair with the lowest rank is merged
// (leftmost first on ties) until no pair has a rank. Both reference libraries merge this way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moetrain::tok {

class BpeRanks {
  public:
    // id of each byte value (every byte must have one), and the merges: (left, right) ->
    // (rank, merged id).
    void set_byte_id(uint8_t byte, int32_t id) { byte_id_[byte] = id; }
    void add_merge(int32_t left, int32_t right, int32_t rank, int32_t merged);
    // Whole-piece lookup used before merging (tiktoken always; HF BPE with ignore_merges).
    void add_whole(std::string bytes, int32_t id) { whole_.emplace(std::move(bytes), id); }
    void set_use_whole(bool on) { use_whole_ = on; }

    // Append the ids of one piece.
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
    size_t merge_count() const { return merges_.size(); }

  private:
    struct Merge {
        int32_t rank, merged;
    };
    static uint64_t key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }
    const Merge* find(int32_t a, int32_t b) const {
        auto it = merges_.find(key(a, b));
        return it == merges_.end() ? nullptr : &it->second;
    }
    int32_t byte_id_[256] = {};
    std::unordered_map<uint64_t, Merge> merges_;
    std::unordered_map<std::string, int32_t> whole_;
    bool use_whole_ = false;
};

// GPT-2's byte <-> printable-character mapping of byte-level BPE vocabularies.
// byte_to_unicode()[b] is the UTF-8 of the character byte b is written as.
const std::vector<std::string>& byte_to_unicode();
// The bytes a vocabulary string stands for; false when a character is not in the mapping.
bool unicode_to_bytes(std::string_view token, std::string& bytes);

}  // namespace moetrain::tok
