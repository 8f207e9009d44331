// tiktoken rank files under each split pattern; when one loads, encode the input itself and
// check the exact byte round trip.
#include <cstdlib>

#include "fuzz_input.h"
#include "moetrain/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    for (const char* pattern : {"gpt2", "cl100k", "o200k"}) {
        moetrain::fuzz::expect_only_errors([&] {
            auto tok = moetrain::parse_tiktoken(text, pattern);
            if (tok->decode(tok->encode(text)) != text) std::abort();
        });
    }
    return 0;
}
