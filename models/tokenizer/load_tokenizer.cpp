// The "bytes" tokenizer and the choice of a tokenizer implementation from its spec.
#include "io/file.h"
#include "moetrain/error.h"
#include "moetrain/tokenizer.h"

namespace moetrain {
namespace {

class BytesTokenizer final : public Tokenizer {
  public:
    std::string kind() const override { return "bytes"; }
    int64_t vocab_size() const override { return 256; }
    void encode(std::string_view text, std::vector<int32_t>& out) const override {
        for (char c : text) out.push_back(static_cast<unsigned char>(c));
    }
    std::string decode(std::span<const int32_t> ids) const override {
        std::string text;
        text.reserve(ids.size());
        for (int32_t id : ids) {
            if (id >= 0 && id < 256)
                text += static_cast<char>(id);
            else
                text += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
        }
        return text;
    }
    std::optional<int32_t> eot_id() const override { return std::nullopt; }
    using Tokenizer::encode;
};

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::shared_ptr<const Tokenizer> make_bytes_tokenizer() {
    static const auto bytes = std::make_shared<BytesTokenizer>();
    return bytes;
}

std::vector<std::string> split_pattern_names() {
    return {"gpt2", "cl100k", "o200k"};
}

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& spec,
                                                const TokenizerOptions& options) {
    if (spec == "bytes") {
        MT_CHECK(options.pattern.empty(),
                 "--tokenizer-pattern applies to tiktoken rank files only");
        return make_bytes_tokenizer();
    }
    const bool json = ends_with(spec, ".json"), tiktoken = ends_with(spec, ".tiktoken"),
               model = ends_with(spec, ".model");
    MT_CHECK(json || tiktoken || model, "unknown tokenizer \"", spec,
             "\" (bytes, or a file: tokenizer.json, *.tiktoken, SentencePiece *.model)");
    MT_CHECK(tiktoken || options.pattern.empty(),
             "--tokenizer-pattern applies to tiktoken rank files only");
    std::string bytes = io::read_file(spec, "tokenizer file");
    try {
        if (json) return parse_hf_tokenizer_json(bytes);
        if (tiktoken) return parse_tiktoken(bytes, options.pattern);
        return parse_sentencepiece(bytes);
    } catch (const Error& e) {
        fail(spec, ": ", e.what());
    }
}

}  // namespace moetrain
