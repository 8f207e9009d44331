// Character classes the split patterns test (\p{L}, \p{N}, \s, the letter subsets of o200k),
// from ICU's Unicode data, and a strict UTF-8 decoder that turns every byte of an invalid
// sequence into a character of its own (class "other"), so that any bytes can be split.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace moetrain::tok {

enum CharClass : uint8_t {
    kLetter = 1,     // \p{L}
    kNumber = 2,     // \p{N}
    kSpace = 4,      // \s (Unicode White_Space)
    kUpperish = 8,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    kLowerish = 16,  // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    kNewline = 32,   // \r or \n
};

uint8_t char_class(uint32_t cp);

// One decoded character: its first byte in the text and its class.
struct Char {
    uint32_t offset;
    uint32_t cp;  // 0xFFFFFFFF for a byte of an invalid sequence
    uint8_t cls;
};

// Decode `text` into `out` (cleared first) and append a sentinel whose offset is text.size().
void decode_chars(std::string_view text, std::vector<Char>& out);

}  // namespace moetrain::tok
