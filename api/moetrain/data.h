// Training data (MODEL.md section 5): tokenisation of a text file with any tokenizer
// (moetrain/tokenizer.h), the 90/10 train/validation split, and the sequential batch loader
// whose position is saved in checkpoints so that a resumed run reads exactly the same batches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moetrain/config.h"
#include "moetrain/tokenizer.h"

namespace moetrain {

// A read-only sequence of token ids: tokens in memory, or memory-mapped shard files.
class TokenSource {
  public:
    virtual ~TokenSource() = default;
    virtual int64_t size() const = 0;
    // Copy tokens [pos, pos + n) into out (0 <= pos, pos + n <= size()). Throws a one-line
    // error for an id the source cannot hold (a shard id >= the model's vocab_size).
    virtual void read(int64_t pos, int64_t n, int32_t* out) const = 0;
};
using TokenStream = std::shared_ptr<const TokenSource>;
TokenStream make_token_stream(std::vector<int32_t> tokens);

// Throws unless the tokenizer's ids fit the model (its vocabulary <= "vocab_size").
void check_tokenizer(const Tokenizer& tokenizer, const std::string& spec,
                     const ModelConfig& config);
// The same for a tokenizer spec (load_tokenizer).
void check_tokenizer(const std::string& spec, const ModelConfig& config);

// Tokenise a whole file. Errors: missing or unreadable file, empty file, unknown tokenizer.
std::vector<int32_t> load_tokens(const std::string& path, const Tokenizer& tokenizer);
std::vector<int32_t> load_tokens(const std::string& path, const std::string& spec = "bytes");
// Tokenise / detokenise text in memory (prompts and samples) with a tokenizer spec. Ids the
// tokenizer cannot represent (bytes: outside 0..255) decode to U+FFFD.
std::vector<int32_t> encode_text(const std::string& text, const std::string& spec = "bytes");
std::string decode_tokens(const std::vector<int32_t>& ids, const std::string& spec = "bytes");

// tokens[0 : floor(0.9 n)] is train, the rest validation.
struct TokenSplit {
    TokenStream train, val;
};
TokenSplit split_tokens(std::vector<int32_t> tokens);

// Consecutive windows of B*T+1 tokens (MODEL.md 5):
//   x = tokens[pos : pos+B*T], y = tokens[pos+1 : pos+B*T+1]; pos += B*T;
//   if pos + B*T + 1 > len: pos = 0.
// Evaluation over N batches = a fresh loader (pos 0) of the split, N calls of next().
// With set_shuffle(seed) the same windows (starts k*B*T, k < batches_per_epoch()) are read in
// a seeded permutation that changes every epoch; position() is then the number of batches read
// (epoch * batches_per_epoch() + index), which set_position() restores exactly.
class BatchLoader {
  public:
    // `split_name` ("train", "val") appears in errors. Throws "data too short: ..." when the
    // stream cannot hold one batch.
    BatchLoader(TokenStream tokens, int B, int T, std::string split_name = "train");
    // Fill x and y with B*T ids each, then advance.
    void next(int32_t* x, int32_t* y);
    void next(std::vector<int32_t>& x, std::vector<int32_t>& y);
    int64_t position() const { return shuffle_ ? batches_read_ : pos_; }
    // Resume: pos must be a position from which one batch fits (0 <= pos, pos + B*T + 1 <= n);
    // shuffled: any count of batches read (>= 0).
    void set_position(int64_t pos);
    void set_shuffle(uint64_t seed);
    int batch() const { return B_; }
    int seq() const { return T_; }
    int64_t size() const { return tokens_->size(); }
    // Batches the loader yields before wrapping back to position 0.
    int64_t batches_per_epoch() const;

  private:
    TokenStream tokens_;
    int B_, T_;
    std::string name_;
    int64_t pos_ = 0;
    std::vector<int32_t> window_;  // the B*T+1 tokens of one batch
    bool shuffle_ = false;
    uint64_t seed_ = 0;
    int64_t batches_read_ = 0, perm_epoch_ = -1;
    std::vector<int64_t> perm_;  // window order of epoch perm_epoch_
};

}  // namespace moetrain
