// Cut points for encoding a long text in pieces (moetrain/tokenizer.h next_line_cut): after a
// single '\n' between a visible ASCII character and an ASCII letter or digit. Each split pattern
// makes that '\n' a piece of its own whether or not the text ends there (a lone white-space
// character before a non-space, or the end, is a piece; a punctuation run's [\r\n]* / [\r\n/]*
// tail stops at the letter or digit), and no piece continues across it, so both sides encode
// to the same ids alone as in the whole text.
#include <cstring>

#include "moetrain/tokenizer.h"

namespace moetrain {
namespace {

bool visible_ascii(char c) {
    return c > ' ' && c < 0x7F;
}
bool ascii_alnum(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

}  // namespace

size_t next_line_cut(std::string_view text, size_t from) {
    const size_t n = text.size();
    // p is a cut when text[p-1] == '\n'; search for the newline at p-1 from from-1 on.
    size_t nl = from == 0 ? 0 : from - 1;
    while (nl < n) {
        const void* hit = std::memchr(text.data() + nl, '\n', n - nl);
        if (!hit) break;
        nl = static_cast<size_t>(static_cast<const char*>(hit) - text.data());
        const size_t p = nl + 1;
        if (nl >= 1 && p < n && visible_ascii(text[nl - 1]) && ascii_alnum(text[p])) return p;
        nl = p;
    }
    return n;
}

}  // namespace moetrain
