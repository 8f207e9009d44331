// Strict JSON reading shared by the config parser, state.json and the safetensors header:
// parsing that rejects duplicate keys, and typed field access on one object that rejects
// unknown keys and wrong types with one-line errors naming the dotted key ("moe.top_k").
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moetrain::io {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Throws "<where>: JSON nested deeper than 64 levels" for text nested deeper than that
// (brackets counted outside strings): nlohmann's parser recurses once per level. Called by
// parse_json_strict, and by parsers of other JSON files before they hand them to nlohmann.
void check_json_nesting(std::string_view text, const std::string& where);

// Parse `text`; syntax errors and duplicate keys throw "<where>: ..." on one line.
json parse_json_strict(const std::string& text, const std::string& where);

// Typed access to the fields of one JSON object. `where` starts every message ("config",
// "/run/step_000010/state.json"); `prefix` is the dotted path of this object ("moe." or "").
class JsonFields {
  public:
    // Throws unless `obj` is an object whose keys are all in `known`.
    JsonFields(const json& obj, std::string where, std::string prefix,
               std::vector<std::string> known);

    bool has(const std::string& key) const { return obj_.contains(key); }
    const json& raw(const std::string& key) const;  // required, any type
    // Quoted dotted name of a key, for messages: "\"moe.top_k\"".
    std::string name(const std::string& key) const;
    [[noreturn]] void fail_key(const std::string& key, const std::string& problem) const;

    // Required (no default) and optional (default) getters; integers are range-checked.
    int64_t integer(const std::string& key, int64_t lo, int64_t hi) const;
    int64_t integer(const std::string& key, int64_t def, int64_t lo, int64_t hi) const;
    uint64_t unsigned_integer(const std::string& key) const;
    double number(const std::string& key) const;  // finite; integers accepted
    double number(const std::string& key, double def) const;
    bool boolean(const std::string& key) const;
    bool boolean(const std::string& key, bool def) const;
    std::string string(const std::string& key) const;
    std::string string(const std::string& key, const std::string& def) const;
    const json& object(const std::string& key) const;  // required JSON object
    // A string that must be one of `allowed`; returns its index.
    size_t choice(const std::string& key, const std::vector<std::string>& allowed,
                  size_t def) const;
    size_t choice(const std::string& key, const std::vector<std::string>& allowed) const;

    const std::string& where() const { return where_; }

  private:
    const json& obj_;
    std::string where_, prefix_;
};

// An ordered_json object built in linear time: ordered_json's own operator[] searches every
// member, so n keys set through it take O(n^2) (a safetensors header or an index of tens of
// thousands of tensors, a tokenizer vocabulary). A key set twice keeps its first position and
// takes the last value, as operator[] does.
class OrderedObject {
  public:
    void set(const std::string& key, ordered_json value);
    size_t size() const { return index_.size(); }
    // The object; the builder is empty afterwards.
    ordered_json take();

  private:
    ordered_json obj_ = ordered_json::object();
    std::unordered_map<std::string, size_t> index_;
};

// "a, b, c"
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");

}  // namespace moetrain::io
