// SentencePiece models (BPE or unigram), run by the real library (Debian libsentencepiece).
#include <sentencepiece_processor.h>

#include "moetrain/error.h"
#include "moetrain/tokenizer.h"
#include "sentencepiece_proto_check.h"

namespace moetrain {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
  public:
    explicit SentencePieceTokenizer(std::string_view proto) {
        check_sentencepiece_proto(proto);  // what would abort inside libsentencepiece
        auto status = sp_.LoadFromSerializedProto(proto);
        MT_CHECK(status.ok(), "sentencepiece model: cannot load (", status.message(), ")");
        MT_CHECK(sp_.GetPieceSize() > 0, "sentencepiece model: no pieces");
    }
    std::string kind() const override { return "sentencepiece"; }
    int64_t vocab_size() const override { return sp_.GetPieceSize(); }
    void encode(std::string_view text, std::vector<int32_t>& out) const override {
        std::vector<int> ids;
        auto status = sp_.Encode(text, &ids);
        MT_CHECK(status.ok(), "sentencepiece: cannot encode (", status.message(), ")");
        out.insert(out.end(), ids.begin(), ids.end());
    }
    std::string decode(std::span<const int32_t> ids) const override {
        // Ids outside the vocabulary become U+FFFD between the decoded runs around them.
        std::string text, part;
        std::vector<int> run;
        auto flush = [&] {
            if (run.empty()) return;
            auto status = sp_.Decode(run, &part);
            MT_CHECK(status.ok(), "sentencepiece: cannot decode (", status.message(), ")");
            text += part;
            run.clear();
        };
        for (int32_t id : ids) {
            if (id >= 0 && id < sp_.GetPieceSize()) {
                run.push_back(id);
            } else {
                flush();
                text += "\xEF\xBF\xBD";
            }
        }
        flush();
        return text;
    }
    std::optional<int32_t> eot_id() const override {
        int eos = sp_.eos_id();
        return eos >= 0 ? std::optional<int32_t>(eos) : std::nullopt;
    }
    using Tokenizer::encode;

  private:
    sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::shared_ptr<const Tokenizer> parse_sentencepiece(std::string_view model_proto) {
    return std::make_shared<SentencePieceTokenizer>(model_proto);
}

}  // namespace moetrain
