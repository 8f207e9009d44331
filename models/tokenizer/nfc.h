// Unicode NFC normalization of text that may hold invalid UTF-8 (the Hugging Face "NFC"
// normalizer of Qwen2-style tokenizer.json files), by ICU.
#pragma once

#include <string>
#include <string_view>

namespace moetrain::tok {

// `in` with every maximal run of valid UTF-8 in NFC; bytes of invalid sequences are kept as
// they are (they cannot compose with anything). ASCII text is returned unchanged at once.
void nfc_normalize(std::string_view in, std::string& out);

}  // namespace moetrain::tok
