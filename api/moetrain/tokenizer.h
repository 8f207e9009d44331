// Tokenizers: text <-> token ids. One implementation per kind, chosen by a spec string:
//   "bytes"             token = byte value (vocabulary 256)
//   "PATH.json"         a Hugging Face tokenizer.json with a BPE model and byte-level
//                       pre-tokenization (GPT-2, Llama-3, Qwen families)
//   "PATH.tiktoken"     a tiktoken rank file (base64 token, rank per line) with a split pattern
//                       (TokenizerOptions::pattern: gpt2 | cl100k | o200k)
//   "PATH.model"        a SentencePiece model (BPE or unigram), run by libsentencepiece
// Every parser of outside input also takes the bytes directly and either returns the tokenizer
// or throws moetrain::Error with one line naming the problem.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moetrain {

class Tokenizer {
  public:
    virtual ~Tokenizer() = default;
    // "bytes", "hf-bpe", "tiktoken" or "sentencepiece".
    virtual std::string kind() const = 0;
    // One more than the largest id the tokenizer can produce.
    virtual int64_t vocab_size() const = 0;
    // Append the ids of `text` to `out`. Special tokens written literally in the text are
    // encoded as their ids (Hugging Face `encode(add_special_tokens=False)`, tiktoken
    // `encode(allowed_special="all")`). Byte-level tokenizers accept any bytes.
    virtual void encode(std::string_view text, std::vector<int32_t>& out) const = 0;
    // Bytes of the ids. Byte-level tokenizers give back the exact input bytes of encode(),
    // invalid UTF-8 included. Ids outside the vocabulary decode to U+FFFD.
    virtual std::string decode(std::span<const int32_t> ids) const = 0;
    // The end-of-text id that separates documents, when the tokenizer defines one.
    virtual std::optional<int32_t> eot_id() const = 0;
    // True when the text on both sides of any next_line_cut() position can be encoded
    // separately with the same ids as the whole text, so that a long text can be encoded in
    // parallel pieces (byte-level BPE and bytes; not SentencePiece, which normalizes whitespace
    // and prefixes each text).
    virtual bool encodes_line_cuts_apart() const { return false; }

    std::vector<int32_t> encode(std::string_view text) const {
        std::vector<int32_t> out;
        encode(text, out);
        return out;
    }
};

struct TokenizerOptions {
    std::string pattern;  // split pattern of a tiktoken rank file: gpt2 | cl100k | o200k
};

// The first position p >= from where a text may be cut for encoding in pieces: right after a
// '\n' that follows a visible ASCII character and precedes an ASCII letter or digit. Every split
// pattern ends a piece there and starts the next one afresh (docs/DATA.md); text.size() when
// there is no such position. Looks at most two bytes before `from`.
size_t next_line_cut(std::string_view text, size_t from);

// Load a tokenizer from its spec (see the top of this file).
std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& spec,
                                                const TokenizerOptions& options = {});

// A tokenizer from the bytes of its file; `name` (a path or file name) picks the kind by its
// ending (.json, .tiktoken, .model) and starts error messages.
std::shared_ptr<const Tokenizer> load_tokenizer_bytes(const std::string& name,
                                                      std::string_view bytes,
                                                      const TokenizerOptions& options = {});
// The file name a checkpoint stores its copy of the tokenizer `spec` under ("tokenizer.json",
// "tokenizer.tiktoken", "tokenizer.model"); "" for "bytes".
std::string tokenizer_copy_name(const std::string& spec);

// SHA-256 of a tokenizer file's bytes (64 hex digits), as state.json records it.
std::string tokenizer_file_sha256(std::string_view bytes);

// Train a byte-level BPE with the GPT-2 split regex on text files; returns a Hugging Face
// tokenizer.json (special tokens get ids 0.., then the 256 bytes, then one id per merge).
struct BpeTrainOptions {
    int64_t vocab_size = 0;
    std::vector<std::string> specials;
    int threads = 1;                                   // files counted at once
    std::function<void(const std::string&)> progress;  // optional status lines
};
std::string train_byte_level_bpe(const std::vector<std::string>& files,
                                 const BpeTrainOptions& options);

// The parsers, from bytes (also the entry points for fuzzing).
std::shared_ptr<const Tokenizer> make_bytes_tokenizer();
std::shared_ptr<const Tokenizer> parse_hf_tokenizer_json(std::string_view json);
std::shared_ptr<const Tokenizer> parse_tiktoken(std::string_view ranks, const std::string& pattern);
std::shared_ptr<const Tokenizer> parse_sentencepiece(std::string_view model_proto);

// Split patterns of the byte-level tokenizers, implemented by hand (docs/DATA.md).
std::vector<std::string> split_pattern_names();  // {"gpt2", "cl100k", "o200k"}

}  // namespace moetrain
