// Training data files: load as tokens (the byte tokenizer), split 90/10, and draw batches
// as the trainer does.
#include "moetrain/data.h"

#include <vector>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    moetrain::fuzz::InputFile in(data, size);
    moetrain::fuzz::expect_only_errors([&] {
        moetrain::TokenSplit s = moetrain::split_tokens(moetrain::load_tokens(in.path(), "bytes"));
        moetrain::BatchLoader loader(s.train, 2, 4, "train");
        std::vector<int32_t> x(8), y(8);
        for (int i = 0; i < 3; ++i) loader.next(x.data(), y.data());
        std::vector<int32_t> val(static_cast<size_t>(s.val->size()));
        s.val->read(0, s.val->size(), val.data());
        (void)moetrain::decode_tokens(val, "bytes");
    });
    return 0;
}
