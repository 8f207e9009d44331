// SHA-256 (FIPS 180-4) of a byte string, as 64 lowercase hex digits: the identity of a
// tokenizer file recorded in state.json.
#pragma once

#include <string>
#include <string_view>

namespace moetrain::io {

std::string sha256_hex(std::string_view bytes);

}  // namespace moetrain::io
