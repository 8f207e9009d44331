// The protobuf wire format walk of check_sentencepiece_proto. Only what the check needs is read:
// ModelProto field 1 (repeated SentencePiece) and, inside each, field 1 (piece text): not empty
// and without NUL bytes. Every other field is skipped by its wire type, so models written by newer
// sentencepiece versions still pass.
#include "sentencepiece_proto_check.h"

#include <cstdint>
#include <optional>

#include "moetrain/error.h"

namespace moetrain {
namespace {

constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;
constexpr uint64_t kModelPieces = 1;  // ModelProto.pieces
constexpr uint64_t kPieceText = 1;    // ModelProto.SentencePiece.piece

// The one message of every wire format problem: the same prefix as the library's own refusals.
[[noreturn]] void not_a_model(const char* what, const std::string& problem) {
    fail("sentencepiece model: cannot load (", what, " ", problem,
         ": truncated, or not a protobuf ModelProto)");
}

// One message's fields in order; each next() returns the field number and wire type, and for a
// length-delimited field its bytes. Fails on truncation, over-long varints and group wire types.
class WireReader {
  public:
    WireReader(std::string_view bytes, const char* what) : rest_(bytes), what_(what) {}

    struct Field {
        uint64_t number;
        uint32_t wire_type;
        std::string_view bytes;  // length-delimited fields only
    };

    std::optional<Field> next() {
        if (rest_.empty()) return std::nullopt;
        const uint64_t key = varint();
        Field f{key >> 3, static_cast<uint32_t>(key & 7), {}};
        if (f.number == 0) not_a_model(what_, "has field number 0");
        switch (f.wire_type) {
            case kVarint:
                (void)varint();
                break;
            case kFixed64:
                skip(8);
                break;
            case kFixed32:
                skip(4);
                break;
            case kLengthDelimited: {
                const uint64_t n = varint();
                if (n > rest_.size())
                    not_a_model(what_, detail::concat("has a field of ", n, " bytes where ",
                                                      rest_.size(), " remain"));
                f.bytes = rest_.substr(0, n);
                rest_.remove_prefix(n);
                break;
            }
            default:
                not_a_model(what_, detail::concat("has wire type ", f.wire_type));
        }
        return f;
    }

  private:
    uint64_t varint() {
        uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (rest_.empty()) not_a_model(what_, "ends inside a varint");
            const auto byte = static_cast<uint8_t>(rest_.front());
            rest_.remove_prefix(1);
            value |= static_cast<uint64_t>(byte & 0x7f) << shift;
            if ((byte & 0x80) == 0) return value;
        }
        not_a_model(what_, "has a varint longer than 10 bytes");
    }
    void skip(size_t n) {
        if (n > rest_.size()) not_a_model(what_, "ends inside a fixed-size field");
        rest_.remove_prefix(n);
    }

    std::string_view rest_;
    const char* what_;
};

}  // namespace

void check_sentencepiece_proto(std::string_view model_proto) {
    WireReader model(model_proto, "the model");
    int64_t index = 0;
    while (auto field = model.next()) {
        if (field->number != kModelPieces) continue;
        if (field->wire_type != kLengthDelimited) not_a_model("a piece", "is not a message");
        WireReader piece(field->bytes, "a piece");
        bool has_text = false;
        while (auto pf = piece.next()) {
            if (pf->number != kPieceText) continue;
            if (pf->wire_type != kLengthDelimited) not_a_model("a piece", "has non-string text");
            // The library's trie takes pieces as NUL-terminated keys: an empty piece or a NUL
            // byte inside one aborts it. The last occurrence of the field wins, as in protobuf.
            has_text = !pf->bytes.empty();
            MT_CHECK(pf->bytes.find('\0') == std::string_view::npos, "sentencepiece model: piece ",
                     index, " contains a NUL byte");
        }
        MT_CHECK(has_text, "sentencepiece model: piece ", index, " has empty text");
        ++index;
    }
}

}  // namespace moetrain
