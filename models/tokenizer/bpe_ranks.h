// Byte-pair encoding by merge rank, shared by the Hugging Face byte-level BPE and tiktoken:
// a piece starts as one token per byte; the adjacent pair with the lowest rank is merged
// (leftmost first on ties) until no pair has a rank. Both reference libraries merge this way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/flat_hash.h"

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
    void merge_short(size_t n, std::vector<int32_t>& out) const;
    void merge_long(size_t n, std::vector<int32_t>& out) const;
    int32_t byte_id_[256] = {};
    PairTable merges_;
    std::unordered_map<std::string, int32_t> whole_;
    bool use_whole_ = false;
};

// GPT-2's byte <-> printable-character mapping of byte-level BPE vocabularies.
// byte_to_unicode()[b] is the UTF-8 of the character byte b is written as.
const std::vector<std::string>& byte_to_unicode();
// The bytes a vocabulary string stands for; false when a character is not in the mapping.
bool unicode_to_bytes(std::string_view token, std::string& bytes);

}  // namespace moetrain::tok
