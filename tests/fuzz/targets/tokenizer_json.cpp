// Hugging Face tokenizer.json: parse; when it loads, encode the input itself and decode the
// ids (exactness is not asserted: add_prefix_space legitimately adds spaces).

#include "fuzz_input.h"
#include "moetrain/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    moetrain::fuzz::expect_only_errors([&] {
        auto tok = moetrain::parse_hf_tokenizer_json(text);
        (void)tok->decode(tok->encode(text));
    });
    return 0;
}
