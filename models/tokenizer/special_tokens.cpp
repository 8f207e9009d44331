#include "tokenizer/special_tokens.h"

#include "moetrain/error.h"

namespace moetrain::tok {

void SpecialTokens::add(std::string content, int32_t id) {
    MT_CHECK(!content.empty(), "special token with id ", id, " has empty content");
    first_byte_[static_cast<unsigned char>(content[0])] = true;
    tokens_.push_back({std::move(content), id});
}

const SpecialTokens::Entry* SpecialTokens::match(std::string_view text, size_t i) const {
    const Entry* best = nullptr;
    for (const Entry& e : tokens_) {
        if (text.compare(i, e.content.size(), e.content) == 0 &&
            (!best || e.content.size() > best->content.size()))
            best = &e;
    }
    return best;
}

const std::string* SpecialTokens::find_id(std::string_view content, int32_t& id) const {
    for (const Entry& e : tokens_) {
        if (e.content == content) {
            id = e.id;
            return &e.content;
        }
    }
    return nullptr;
}

bool SpecialTokens::any_contains(char c) const {
    for (const Entry& e : tokens_)
        if (e.content.find(c) != std::string::npos) return true;
    return false;
}

int32_t SpecialTokens::max_id() const {
    int32_t m = -1;
    for (const Entry& e : tokens_) m = std::max(m, e.id);
    return m;
}

}  // namespace moetrain::tok
