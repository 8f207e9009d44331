// Special (added) tokens written literally inside text: the text is cut at each occurrence
// (leftmost, longest on ties) and the token's id is emitted there; ordinary text between
// occurrences goes to the tokenizer's normal encoder.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moetrain::tok {

class SpecialTokens {
  public:
    void add(std::string content, int32_t id);
    bool empty() const { return tokens_.empty(); }
    // Calls ordinary(std::string_view) for text between specials and pushes special ids.
    template <typename Ordinary>
    void encode(std::string_view text, std::vector<int32_t>& out, Ordinary&& ordinary) const {
        size_t start = 0, i = 0;
        while (i < text.size()) {
            const Entry* hit =
                first_byte_[static_cast<unsigned char>(text[i])] ? match(text, i) : nullptr;
            if (!hit) {
                ++i;
                continue;
            }
            if (i > start) ordinary(text.substr(start, i - start));
            out.push_back(hit->id);
            i += hit->content.size();
            start = i;
        }
        if (start < text.size()) ordinary(text.substr(start));
    }
    const std::string* find_id(std::string_view content, int32_t& id) const;
    int32_t max_id() const;
    bool any_contains(char c) const;

  private:
    struct Entry {
        std::string content;
        int32_t id;
    };
    const Entry* match(std::string_view text, size_t i) const;
    std::vector<Entry> tokens_;
    bool first_byte_[256] = {};
};

}  // namespace moetrain::tok
