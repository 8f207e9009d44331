// Unicode classes from ICU (u_charType, u_isUWhiteSpace): a table for the Basic Multilingual
// Plane, filled once, and direct ICU calls above it.
#include "tokenizer/unicode_class.h"

#include <unicode/uchar.h>

#include <array>

namespace moetrain::tok {
namespace {

uint8_t class_from_icu(uint32_t cp) {
    const auto c = static_cast<UChar32>(cp);
    uint8_t cls = 0;
    switch (u_charType(c)) {
        case U_UPPERCASE_LETTER:
        case U_TITLECASE_LETTER:
            cls = kLetter | kUpperish;
            break;
        case U_LOWERCASE_LETTER:
            cls = kLetter | kLowerish;
            break;
        case U_MODIFIER_LETTER:
        case U_OTHER_LETTER:
            cls = kLetter | kUpperish | kLowerish;
            break;
        case U_NON_SPACING_MARK:
        case U_ENCLOSING_MARK:
        case U_COMBINING_SPACING_MARK:
            cls = kUpperish | kLowerish;
            break;
        case U_DECIMAL_DIGIT_NUMBER:
        case U_LETTER_NUMBER:
        case U_OTHER_NUMBER:
            cls = kNumber;
            break;
        default:
            break;
    }
    if (u_isUWhiteSpace(c)) cls |= kSpace;
    if (cp == '\r' || cp == '\n') cls |= kNewline;
    return cls;
}

const std::array<uint8_t, 0x10000>& bmp_table() {
    static const std::array<uint8_t, 0x10000> table = [] {
        std::array<uint8_t, 0x10000> t{};
        for (uint32_t cp = 0; cp < 0x10000; ++cp) t[cp] = class_from_icu(cp);
        return t;
    }();
    return table;
}

}  // namespace

uint8_t char_class(uint32_t cp) {
    if (cp < 0x10000) return bmp_table()[cp];
    if (cp > 0x10FFFF) return 0;
    return class_from_icu(cp);
}

void decode_chars(std::string_view text, std::vector<Char>& out) {
    out.clear();
    out.reserve(text.size() + 1);
    const auto& bmp = bmp_table();
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    size_t i = 0;
    while (i < n) {
        const uint32_t b0 = s[i];
        const auto off = static_cast<uint32_t>(i);
        if (b0 < 0x80) {
            out.push_back({off, b0, bmp[b0]});
            ++i;
            continue;
        }
        // Length and the smallest code point of that length (overlong forms are invalid).
        size_t len = 0;
        uint32_t cp = 0, min = 0;
        if (b0 >= 0xC2 && b0 <= 0xDF)
            len = 2, cp = b0 & 0x1F, min = 0x80;
        else if (b0 >= 0xE0 && b0 <= 0xEF)
            len = 3, cp = b0 & 0x0F, min = 0x800;
        else if (b0 >= 0xF0 && b0 <= 0xF4)
            len = 4, cp = b0 & 0x07, min = 0x10000;
        bool ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; ++k) {
            if ((s[i + k] & 0xC0) != 0x80)
                ok = false;
            else
                cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
        if (!ok) {
            out.push_back({off, 0xFFFFFFFFu, 0});
            ++i;
            continue;
        }
        out.push_back({off, cp, char_class(cp)});
        i += len;
    }
    out.push_back({static_cast<uint32_t>(n), 0, 0});
}

}  // namespace moetrain::tok
