// The pre-tokenizer split regexes of the byte-level BPE families, as hand-written matchers
// that give exactly the pieces the regex engines of tiktoken (Rust regex / fancy-regex) and
// Hugging Face tokenizers (Oniguruma) give (docs/DATA.md lists the regexes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moetrain::tok {

enum class SplitPattern {
    gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    cl100k,  // tiktoken's cl100k_base (possessive form, \s++$)
    llama3,  // the cl100k regex as Llama-3's tokenizer.json writes it (\s*[\r\n]+)
    qwen2,   // llama3 with single digits (\p{N} instead of \p{N}{1,3})
    o200k,   // tiktoken's o200k_base
};

// The pattern named "gpt2", "cl100k" or "o200k"; throws a one-line error otherwise.
SplitPattern split_pattern_by_name(const std::string& name);
// The pattern whose regex text is `regex` (as written in a tokenizer.json Split
// pre-tokenizer); throws a one-line error for a regex that is not one of the known ones.
SplitPattern split_pattern_by_regex(const std::string& regex);

// Byte offsets where the pieces of `text` end (the last is text.size(); empty text gives none).
void split_pieces(SplitPattern pattern, std::string_view text, std::vector<uint32_t>& ends);

}  // namespace moetrain::tok
