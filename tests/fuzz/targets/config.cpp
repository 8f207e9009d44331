// Model config JSON (MODEL.md section 1): parse, validate, write back and parse again.
#include "moetrain/config.h"

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    moetrain::fuzz::expect_only_errors([&] {
        const moetrain::ModelConfig c = moetrain::parse_config(text);
        const std::string again = moetrain::config_to_json(c);
        if (moetrain::config_to_json(moetrain::parse_config(again)) != again) std::abort();
    });
    return 0;
}
