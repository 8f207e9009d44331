// state.json of a checkpoint: parse (strict keys, types, domains), write back, parse again.
#include "fuzz_input.h"
#include "io/checkpoint_meta.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    moetrain::fuzz::expect_only_errors([&] {
        moetrain::OptimizerState opt{};
        const moetrain::TrainState s = moetrain::io::parse_state(text, "state.json", &opt);
        moetrain::OptimizerState opt2{};
        (void)moetrain::io::parse_state(moetrain::io::state_to_json(s, opt), "again", &opt2);
        if (opt2 != opt) std::abort();
    });
    return 0;
}
