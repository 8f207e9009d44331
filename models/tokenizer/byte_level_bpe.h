// A byte-level BPE tokenizer (split pattern -> pieces -> rank merges), the common core of the
// Hugging Face tokenizer.json and tiktoken loaders, which only fill it differently.
#pragma once

#include <string>
#include <vector>

#include "moetrain/tokenizer.h"
#include "tokenizer/bpe_ranks.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/split_pattern.h"

namespace moetrain::tok {

class ByteLevelBpe final : public Tokenizer {
  public:
    std::string kind_name;
    SplitPattern pattern = SplitPattern::gpt2;
    bool add_prefix_space = false;  // HF ByteLevel option: a space before text not starting so
    bool nfc = false;               // HF "NFC" normalizer: ordinary text is put in NFC first
    BpeRanks ranks;
    SpecialTokens specials;
    std::vector<std::string> id_bytes;  // bytes each id decodes to, special ids included
    std::vector<bool> id_known;
    int32_t eot = -1;

    std::string kind() const override { return kind_name; }
    int64_t vocab_size() const override;
    void encode(std::string_view text, std::vector<int32_t>& out) const override;
    std::string decode(std::span<const int32_t> ids) const override;
    std::optional<int32_t> eot_id() const override {
        return eot >= 0 ? std::optional<int32_t>(eot) : std::nullopt;
    }
    // A prefix space would be added to each piece, and a special token holding a newline could
    // span a cut.
    bool encodes_line_cuts_apart() const override {
        return !add_prefix_space && !specials.any_contains('\n');
    }
    using Tokenizer::encode;

    void set_id_bytes(int32_t id, std::string bytes);
    // The first of the usual end-of-text contents that is a special token.
    void pick_eot();

  private:
    void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;
    void encode_cached(std::string_view piece, std::vector<int32_t>& out) const;
    const uint64_t instance_ = next_instance();  // keys the per-thread piece cache
    static uint64_t next_instance();
};

}  // namespace moetrain::tok
