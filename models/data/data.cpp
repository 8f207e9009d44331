// Tokenisation of text files, the 90/10 split and the sequential BatchLoader of MODEL.md 5.
#include "moetrain/data.h"

#include <algorithm>
#include <cstring>

#include "io/file.h"
#include "moetrain/error.h"

namespace moetrain {
namespace {

class VectorTokens final : public TokenSource {
  public:
    explicit VectorTokens(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
    int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
    void read(int64_t pos, int64_t n, int32_t* out) const override {
        // copy_n, not memcpy: an empty stream reads n = 0 with both pointers null, which
        // memcpy does not allow (UBSan reports it).
        std::copy_n(tokens_.data() + pos, n, out);
    }

  private:
    std::vector<int32_t> tokens_;
};

}  // namespace

TokenStream make_token_stream(std::vector<int32_t> tokens) {
    return std::make_shared<const VectorTokens>(std::move(tokens));
}

void check_tokenizer(const Tokenizer& tokenizer, const std::string& spec,
                     const ModelConfig& config) {
    MT_CHECK(tokenizer.vocab_size() <= config.vocab_size, "tokenizer \"", spec, "\" needs ",
             "\"vocab_size\" >= ", tokenizer.vocab_size(), ", the model has ", config.vocab_size);
}

void check_tokenizer(const std::string& spec, const ModelConfig& config) {
    check_tokenizer(*load_tokenizer(spec), spec, config);
}

std::vector<int32_t> encode_text(const std::string& text, const std::string& spec) {
    return load_tokenizer(spec)->encode(text);
}

std::string decode_tokens(const std::vector<int32_t>& ids, const std::string& spec) {
    return load_tokenizer(spec)->decode(ids);
}

std::vector<int32_t> load_tokens(const std::string& path, const Tokenizer& tokenizer) {
    std::string text = io::read_file(path, io::kTextDataFile);
    MT_CHECK(!text.empty(), "data file ", path, " is empty");
    return tokenizer.encode(text);
}

std::vector<int32_t> load_tokens(const std::string& path, const std::string& spec) {
    return load_tokens(path, *load_tokenizer(spec));
}

TokenSplit split_tokens(std::vector<int32_t> tokens) {
    // floor(0.9 n) in exact integer arithmetic.
    size_t n_train = tokens.size() / 10 * 9 + tokens.size() % 10 * 9 / 10;
    std::vector<int32_t> val(tokens.begin() + static_cast<std::ptrdiff_t>(n_train), tokens.end());
    tokens.resize(n_train);
    return {make_token_stream(std::move(tokens)), make_token_stream(std::move(val))};
}

BatchLoader::BatchLoader(TokenStream tokens, int B, int T, std::string split_name)
    : tokens_(std::move(tokens)), B_(B), T_(T), name_(std::move(split_name)) {
    MT_CHECK(tokens_, "batch loader for the ", name_, " split has no token stream");
    MT_CHECK(B > 0 && T > 0, "batch size and sequence length must be positive, got ", B, " x ", T);
    int64_t need = int64_t{B} * T + 1;
    MT_CHECK(size() >= need, "data too short: ", size(), " tokens in the ", name_,
             " split, one batch of ", B, " x ", T, " needs ", need);
}

void BatchLoader::next(int32_t* x, int32_t* y) {
    const int64_t bt = int64_t{B_} * T_;
    window_.resize(static_cast<size_t>(bt) + 1);
    int64_t start = pos_;
    if (shuffle_) {
        const int64_t n = batches_per_epoch(), epoch = batches_read_ / n;
        if (epoch != perm_epoch_) {
            // Fisher-Yates with SplitMix64 seeded by (seed, epoch): the same on every machine.
            perm_.resize(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) perm_[static_cast<size_t>(i)] = i;
            uint64_t state = seed_ ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch + 1));
            for (int64_t i = n - 1; i > 0; --i) {
                uint64_t z = (state += 0x9E3779B97F4A7C15ull);
                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
                z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
                z ^= z >> 31;
                std::swap(perm_[static_cast<size_t>(i)],
                          perm_[static_cast<size_t>(z % static_cast<uint64_t>(i + 1))]);
            }
            perm_epoch_ = epoch;
        }
        start = perm_[static_cast<size_t>(batches_read_ % n)] * bt;
        ++batches_read_;
    }
    tokens_->read(start, bt + 1, window_.data());
    std::memcpy(x, window_.data(), static_cast<size_t>(bt) * sizeof(int32_t));
    std::memcpy(y, window_.data() + 1, static_cast<size_t>(bt) * sizeof(int32_t));
    pos_ += bt;
    if (pos_ + bt + 1 > size()) pos_ = 0;
}

void BatchLoader::next(std::vector<int32_t>& x, std::vector<int32_t>& y) {
    x.resize(static_cast<size_t>(B_) * T_);
    y.resize(x.size());
    next(x.data(), y.data());
}

void BatchLoader::set_shuffle(uint64_t seed) {
    shuffle_ = true;
    seed_ = seed;
    perm_epoch_ = -1;
}

void BatchLoader::set_position(int64_t pos) {
    if (shuffle_) {
        MT_CHECK(pos >= 0, name_, " loader position ", pos, " is negative");
        batches_read_ = pos;
        return;
    }
    const int64_t bt = int64_t{B_} * T_;
    MT_CHECK(pos >= 0 && pos + bt + 1 <= size(), name_, " loader position ", pos,
             " is out of range: ", size(), " tokens cannot hold a batch of ", B_, " x ", T_,
             " starting there");
    pos_ = pos;
}

int64_t BatchLoader::batches_per_epoch() const {
    return (size() - 1) / (int64_t{B_} * T_);
}

}  // namespace moetrain
