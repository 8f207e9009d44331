// The "bytes" tokenizer and the choice of a tokenizer implementation from its spec.
#include "io/file.h"
#include "io/sha256.h"
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
    bool encodes_line_cuts_apart() const override { return true; }
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

std::shared_ptr<const Tokenizer> load_tokenizer_bytes(const std::string& name,
                                                      std::string_view bytes,
                                                      const TokenizerOptions& options) {
    const std::string kind = tokenizer_copy_name(name);
    MT_CHECK(kind == "tokenizer.tiktoken" || options.pattern.empty(),
             "--tokenizer-pattern applies to tiktoken rank files only");
    try {
        if (kind == "tokenizer.json") return parse_hf_tokenizer_json(bytes);
        if (kind == "tokenizer.tiktoken") return parse_tiktoken(bytes, options.pattern);
        return parse_sentencepiece(bytes);
    } catch (const Error& e) {
        fail(name, ": ", e.what());
    }
}

std::string tokenizer_file_sha256(std::string_view bytes) {
    return io::sha256_hex(bytes);
}

std::string tokenizer_copy_name(const std::string& spec) {
    if (spec == "bytes") return "";
    for (const char* ext : {".json", ".tiktoken", ".model"})
        if (ends_with(spec, ext)) return std::string("tokenizer") + ext;
    fail("unknown tokenizer \"", spec,
         "\" (bytes, or a file: tokenizer.json, *.tiktoken, SentencePiece *.model)");
}

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& spec,
                                                const TokenizerOptions& options) {
    if (spec == "bytes") {
        MT_CHECK(options.pattern.empty(),
                 "--tokenizer-pattern applies to tiktoken rank files only");
        return make_bytes_tokenizer();
    }
    tokenizer_copy_name(spec);  // a known kind before reading anything
    return load_tokenizer_bytes(spec, io::read_file(spec, io::kTokenizerFile), options);
}

}  // namespace moetrain
