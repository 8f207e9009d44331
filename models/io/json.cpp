// Strict JSON reading (see io/json.h): duplicate-key detection while the DOM is built,
// and typed, range-checked field getters whose errors name the dotted key.
#include "io/json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_set>
#include <utility>

#include "moetrain/error.h"

namespace moetrain::io {

// Every JSON moetrain reads nests a few levels deep; the parser (and the destruction of its
// result) recurse once per level, so deep nesting from a crafted file would overflow the
// stack. Counted on the raw text, outside strings, before parsing.
constexpr int kMaxJsonDepth = 64;

void check_json_nesting(std::string_view text, const std::string& where) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            MT_CHECK(++depth <= kMaxJsonDepth, where, ": JSON nested deeper than ", kMaxJsonDepth,
                     " levels");
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
}

namespace {

// nlohmann's DOM builder, with every key checked against the keys already seen in its object
// (one hash set per open object), so that duplicate keys are found in linear time. (The parser
// callback that used to do this made nlohmann's callback parser quadratic in the number of
// members of one object: 30k safetensors entries took 16 s.)
class StrictDomBuilder {
  public:
    using Dom = nlohmann::detail::json_sax_dom_parser<json>;
    explicit StrictDomBuilder(json& result) : dom_(result, true) {}

    bool null() { return dom_.null(); }
    bool boolean(bool v) { return dom_.boolean(v); }
    bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
    bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
    bool number_float(json::number_float_t v, const json::string_t& text) {
        return dom_.number_float(v, text);
    }
    bool string(json::string_t& v) { return dom_.string(v); }
    bool binary(json::binary_t& v) { return dom_.binary(v); }
    bool start_object(std::size_t n) {
        open_keys_.emplace_back();
        return dom_.start_object(n);
    }
    bool key(json::string_t& k) {
        if (!open_keys_.back().insert(k).second && duplicate_.empty()) duplicate_ = k;
        return dom_.key(k);
    }
    bool end_object() {
        open_keys_.pop_back();
        return dom_.end_object();
    }
    bool start_array(std::size_t n) { return dom_.start_array(n); }
    bool end_array() { return dom_.end_array(); }
    template <class Exception>
    bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
        return dom_.parse_error(position, token, e);
    }

    const std::string& duplicate() const { return duplicate_; }

  private:
    Dom dom_;
    std::vector<std::unordered_set<std::string>> open_keys_;
    std::string duplicate_;  // the first duplicate key, if any
};

}  // namespace

json parse_json_strict(const std::string& text, const std::string& where) {
    check_json_nesting(text, where);
    json j;
    StrictDomBuilder builder(j);
    try {
        json::sax_parse(text, &builder);
    } catch (const json::exception& e) {
        fail(where, ": invalid JSON: ", e.what());
    }
    MT_CHECK(builder.duplicate().empty(), where, ": duplicate key \"", builder.duplicate(), "\"");
    return j;
}

void OrderedObject::set(const std::string& key, ordered_json value) {
    auto& members = obj_.get_ref<ordered_json::object_t&>();
    using Members = ordered_json::object_t::Container;
    auto [it, fresh] = index_.emplace(key, members.size());
    if (fresh)
        members.Members::emplace_back(key, std::move(value));
    else
        (members.begin() + static_cast<std::ptrdiff_t>(it->second))->second = std::move(value);
}

ordered_json OrderedObject::take() {
    index_.clear();
    return std::exchange(obj_, ordered_json::object());
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
    std::string s;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i) s += sep;
        s += items[i];
    }
    return s;
}

JsonFields::JsonFields(const json& obj, std::string where, std::string prefix,
                       std::vector<std::string> known)
    : obj_(obj), where_(std::move(where)), prefix_(std::move(prefix)) {
    if (!obj_.is_object()) {
        if (prefix_.empty())
            fail(where_, ": the top level must be a JSON object, got ", obj_.dump());
        fail(where_, ": \"", prefix_.substr(0, prefix_.size() - 1),
             "\" must be a JSON object, got ", obj_.dump());
    }
    for (const auto& item : obj_.items()) {
        if (std::find(known.begin(), known.end(), item.key()) == known.end())
            fail(where_, ": unknown key ", name(item.key()), " (known: ", join(known), ")");
    }
}

std::string JsonFields::name(const std::string& key) const {
    return "\"" + prefix_ + key + "\"";
}

void JsonFields::fail_key(const std::string& key, const std::string& problem) const {
    fail(where_, ": ", name(key), " ", problem);
}

const json& JsonFields::raw(const std::string& key) const {
    if (!obj_.contains(key)) fail(where_, ": missing required key ", name(key));
    return obj_.at(key);
}

int64_t JsonFields::integer(const std::string& key, int64_t lo, int64_t hi) const {
    const json& v = raw(key);
    if (!v.is_number_integer()) fail_key(key, "must be an integer, got " + v.dump());
    int64_t value = 0;
    bool in_range = true;
    if (v.is_number_unsigned()) {
        uint64_t u = v.get<uint64_t>();
        in_range = u <= static_cast<uint64_t>(INT64_MAX);
        value = in_range ? static_cast<int64_t>(u) : 0;
    } else {
        value = v.get<int64_t>();
    }
    if (!in_range || value < lo || value > hi)
        fail_key(key, "= " + v.dump() + " is out of range [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
    return value;
}

int64_t JsonFields::integer(const std::string& key, int64_t def, int64_t lo, int64_t hi) const {
    return has(key) ? integer(key, lo, hi) : def;
}

uint64_t JsonFields::unsigned_integer(const std::string& key) const {
    const json& v = raw(key);
    if (!v.is_number_unsigned()) fail_key(key, "must be a non-negative integer, got " + v.dump());
    return v.get<uint64_t>();
}

double JsonFields::number(const std::string& key) const {
    const json& v = raw(key);
    if (!v.is_number()) fail_key(key, "must be a number, got " + v.dump());
    double d = v.get<double>();
    if (!std::isfinite(d)) fail_key(key, "must be finite, got " + v.dump());
    return d;
}

double JsonFields::number(const std::string& key, double def) const {
    return has(key) ? number(key) : def;
}

bool JsonFields::boolean(const std::string& key) const {
    const json& v = raw(key);
    if (!v.is_boolean()) fail_key(key, "must be true or false, got " + v.dump());
    return v.get<bool>();
}

bool JsonFields::boolean(const std::string& key, bool def) const {
    return has(key) ? boolean(key) : def;
}

std::string JsonFields::string(const std::string& key) const {
    const json& v = raw(key);
    if (!v.is_string()) fail_key(key, "must be a string, got " + v.dump());
    return v.get<std::string>();
}

std::string JsonFields::string(const std::string& key, const std::string& def) const {
    return has(key) ? string(key) : def;
}

const json& JsonFields::object(const std::string& key) const {
    const json& v = raw(key);
    if (!v.is_object()) fail_key(key, "must be a JSON object, got " + v.dump());
    return v;
}

size_t JsonFields::choice(const std::string& key, const std::vector<std::string>& allowed) const {
    std::string s = string(key);
    auto it = std::find(allowed.begin(), allowed.end(), s);
    if (it == allowed.end()) fail_key(key, "= \"" + s + "\" is not one of " + join(allowed));
    return static_cast<size_t>(it - allowed.begin());
}

size_t JsonFields::choice(const std::string& key, const std::vector<std::string>& allowed,
                          size_t def) const {
    return has(key) ? choice(key, allowed) : def;
}

}  // namespace moetrain::io
