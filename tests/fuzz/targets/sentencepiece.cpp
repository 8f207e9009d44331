// SentencePiece model files (the ModelProto that libsentencepiece reads, as `--tokenizer
// x.model` and import's tokenizer copy do): load; when one loads, encode the input itself and
// decode the ids.
#include "fuzz_input.h"
#include "moetrain/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string proto(reinterpret_cast<const char*>(data), size);
    moetrain::fuzz::expect_only_errors([&] {
        auto tok = moetrain::parse_sentencepiece(proto);
        (void)tok->decode(tok->encode(proto));
        (void)tok->eot_id();
    });
    return 0;
}
