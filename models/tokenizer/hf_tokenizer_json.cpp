// Hugging Face tokenizer.json with a BPE model and byte-level pre-tokenization: vocabulary
// strings in GPT-2's byte <-> unicode alphabet, merges by rank ("a b" or ["a", "b"]), the
// split regex (ByteLevel's own GPT-2 regex, or a Split pre-tokenizer before a ByteLevel one),
// and the added tokens, which are matched literally in the text; an NFC normalizer is applied to
// the text between them. Anything the model would do differently (other normalizers, dropout,
// subword prefixes, byte fallback, stripping added tokens) is rejected with a message naming
// the field instead of being approximated.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/json.h"
#include "moetrain/error.h"
#include "tokenizer/byte_level_bpe.h"

namespace moetrain {
namespace {

using nlohmann::json;
constexpr const char* kWhere = "tokenizer.json";

const json* field(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool flag(const json& obj, const char* key, const char* where) {
    const json* v = field(obj, key);
    if (!v) return false;
    MT_CHECK(v->is_boolean(), kWhere, ": ", where, ".", key, " must be true or false");
    return v->get<bool>();
}

std::string str(const json& obj, const char* key, const char* where) {
    const json* v = field(obj, key);
    MT_CHECK(v && v->is_string(), kWhere, ": ", where, ".", key, " must be a string");
    return v->get<std::string>();
}

// The pre-tokenizer: returns the split pattern and sets add_prefix_space.
tok::SplitPattern read_pre_tokenizer(const json& pre, bool& add_prefix_space) {
    MT_CHECK(pre.is_object(), kWhere, ": pre_tokenizer must be an object");
    const std::string type = str(pre, "type", "pre_tokenizer");
    if (type == "ByteLevel") {
        MT_CHECK(!field(pre, "use_regex") || flag(pre, "use_regex", "pre_tokenizer"), kWhere,
                 ": pre_tokenizer ByteLevel without use_regex has no split rule");
        add_prefix_space = flag(pre, "add_prefix_space", "pre_tokenizer");
        return tok::SplitPattern::gpt2;
    }
    MT_CHECK(type == "Sequence", kWhere, ": pre_tokenizer type \"", type,
             "\" is not supported (ByteLevel, or Sequence of Split + ByteLevel)");
    const json* list = field(pre, "pretokenizers");
    MT_CHECK(list && list->is_array() && list->size() == 2, kWhere,
             ": pre_tokenizer Sequence must hold exactly a Split and a ByteLevel");
    const json& split = (*list)[0];
    const json& bl = (*list)[1];
    MT_CHECK(split.is_object() && bl.is_object() &&
                 str(split, "type", "pre_tokenizer.pretokenizers[0]") == "Split" &&
                 str(bl, "type", "pre_tokenizer.pretokenizers[1]") == "ByteLevel",
             kWhere, ": pre_tokenizer Sequence must hold exactly a Split and a ByteLevel");
    MT_CHECK(!flag(bl, "use_regex", "pre_tokenizer.pretokenizers[1]"), kWhere,
             ": a ByteLevel after a Split must have use_regex false");
    add_prefix_space = flag(bl, "add_prefix_space", "pre_tokenizer.pretokenizers[1]");
    MT_CHECK(str(split, "behavior", "pre_tokenizer.pretokenizers[0]") == "Isolated" &&
                 !flag(split, "invert", "pre_tokenizer.pretokenizers[0]"),
             kWhere, ": only an Isolated, non-inverted Split is supported");
    const json* pattern = field(split, "pattern");
    MT_CHECK(pattern && pattern->is_object() && field(*pattern, "Regex") &&
                 (*pattern)["Regex"].is_string(),
             kWhere, ": the Split pre-tokenizer must have a pattern.Regex string");
    return tok::split_pattern_by_regex((*pattern)["Regex"].get<std::string>());
}

// The normalizer: NFC (Qwen2), alone or in a Sequence, is applied; any other is refused.
// Returns whether text is put in NFC.
bool read_normalizer(const json& norm) {
    MT_CHECK(norm.is_object(), kWhere, ": normalizer must be an object");
    const std::string type = str(norm, "type", "normalizer");
    if (type == "NFC") return true;
    if (type == "Sequence") {
        const json* list = field(norm, "normalizers");
        MT_CHECK(list && list->is_array(), kWhere,
                 ": normalizer Sequence must have a normalizers array");
        bool nfc = false;
        for (const json& n : *list) nfc = read_normalizer(n) || nfc;
        return nfc;
    }
    fail(kWhere, ": normalizer type \"", type,
         "\" is not supported (moetrain applies NFC, alone or in a Sequence)");
}

// Ids index dense tables: a bound keeps a hostile file from asking for gigabytes.
constexpr int64_t kMaxId = int64_t{1} << 24;

int32_t read_id(const json& v, const std::string& what) {
    MT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < kMaxId, kWhere,
             ": ", what, " must be an id in [0, 2^24)");
    return static_cast<int32_t>(v.get<int64_t>());
}

void read_model(const json& model, tok::ByteLevelBpe& t,
                std::unordered_map<std::string, int32_t>& vocab_by_string) {
    MT_CHECK(model.is_object(), kWhere, ": model must be an object");
    if (const json* type = field(model, "type"))
        MT_CHECK(type->is_string() && type->get<std::string>() == "BPE", kWhere,
                 ": model type must be \"BPE\"");
    MT_CHECK(!field(model, "dropout") ||
                 ((*field(model, "dropout")).is_number() && model["dropout"].get<double>() == 0),
             kWhere, ": model.dropout is not supported (encoding must be deterministic)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        const json* v = field(model, key);
        MT_CHECK(!v || (v->is_string() && v->get<std::string>().empty()), kWhere, ": model.", key,
                 " is not supported with byte-level BPE");
    }
    MT_CHECK(!flag(model, "byte_fallback", "model"), kWhere,
             ": model.byte_fallback is not supported with byte-level BPE");
    t.ranks.set_use_whole(flag(model, "ignore_merges", "model"));

    const json* vocab = field(model, "vocab");
    MT_CHECK(vocab && vocab->is_object() && !vocab->empty(), kWhere,
             ": model.vocab must be a non-empty object");
    std::string bytes;
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
        int32_t id = read_id(it.value(), "model.vocab[\"" + it.key() + "\"]");
        MT_CHECK(tok::unicode_to_bytes(it.key(), bytes), kWhere, ": model.vocab entry \"", it.key(),
                 "\" is not written in the byte-level alphabet");
        MT_CHECK(vocab_by_string.emplace(it.key(), id).second, kWhere,
                 ": duplicate model.vocab entry");
        t.set_id_bytes(id, bytes);
        t.ranks.add_whole(bytes, id);
    }
    for (int b = 0; b < 256; ++b) {
        auto it = vocab_by_string.find(tok::byte_to_unicode()[static_cast<size_t>(b)]);
        MT_CHECK(it != vocab_by_string.end(), kWhere, ": model.vocab has no token for byte ", b,
                 " (a byte-level vocabulary needs all 256)");
        t.ranks.set_byte_id(static_cast<uint8_t>(b), it->second);
    }
    const json* merges = field(model, "merges");
    MT_CHECK(merges && merges->is_array(), kWhere, ": model.merges must be an array");
    int32_t rank = 0;
    for (const json& m : *merges) {
        std::string a, b;
        if (m.is_string()) {
            const std::string& s = m.get_ref<const std::string&>();
            size_t sp = s.find(' ');
            MT_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < s.size() &&
                         s.find(' ', sp + 1) == std::string::npos,
                     kWhere, ": model.merges[", rank, "] is not \"left right\"");
            a = s.substr(0, sp), b = s.substr(sp + 1);
        } else {
            MT_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), kWhere,
                     ": model.merges[", rank, "] is not a pair of strings");
            a = m[0].get<std::string>(), b = m[1].get<std::string>();
        }
        auto ia = vocab_by_string.find(a), ib = vocab_by_string.find(b),
             im = vocab_by_string.find(a + b);
        MT_CHECK(ia != vocab_by_string.end() && ib != vocab_by_string.end() &&
                     im != vocab_by_string.end(),
                 kWhere, ": model.merges[", rank, "] names a token that is not in model.vocab");
        t.ranks.add_merge(ia->second, ib->second, rank, im->second);
        ++rank;
    }
}

void read_added_tokens(const json* added, tok::ByteLevelBpe& t) {
    if (!added) return;
    MT_CHECK(added->is_array(), kWhere, ": added_tokens must be an array");
    for (const json& a : *added) {
        MT_CHECK(a.is_object() && field(a, "id") && field(a, "content") && a["content"].is_string(),
                 kWhere, ": each added_tokens entry needs an id and a content string");
        int32_t id = read_id(a["id"], "added_tokens id");
        std::string content = a["content"].get<std::string>();
        for (const char* key : {"single_word", "lstrip", "rstrip"})
            MT_CHECK(!flag(a, key, "added_tokens"), kWhere, ": added token \"", content, "\" sets ",
                     key, ", which moetrain does not support");
        MT_CHECK(!content.empty(), kWhere, ": added token ", id, " has empty content");
        // Added tokens decode to their content, so that decode(encode(text)) == text holds
        // for text holding them too.
        t.set_id_bytes(id, content);
        t.specials.add(std::move(content), id);
    }
}

}  // namespace

std::shared_ptr<const Tokenizer> parse_hf_tokenizer_json(std::string_view text) {
    io::check_json_nesting(text, kWhere);
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        fail(kWhere, ": not valid JSON (", e.what(), ")");
    }
    MT_CHECK(j.is_object(), kWhere, ": the top level must be an object");
    auto t = std::make_shared<tok::ByteLevelBpe>();
    t->kind_name = "hf-bpe";
    if (const json* norm = field(j, "normalizer")) t->nfc = read_normalizer(*norm);
    const json* pre = field(j, "pre_tokenizer");
    MT_CHECK(pre, kWhere, ": pre_tokenizer is missing (byte-level BPE needs one)");
    t->pattern = read_pre_tokenizer(*pre, t->add_prefix_space);
    const json* model = field(j, "model");
    MT_CHECK(model, kWhere, ": model is missing");
    std::unordered_map<std::string, int32_t> vocab_by_string;
    read_model(*model, *t, vocab_by_string);
    read_added_tokens(field(j, "added_tokens"), *t);
    t->pick_eot();
    return t;
}

}  // namespace moetrain
