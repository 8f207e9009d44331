// safetensors header and data offsets: open (full header validation), then read every
// tensor (per-tensor checksums when present) and the metadata the checkpoint reader uses.
#include "moetrain/safetensors.h"

#include <vector>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    moetrain::fuzz::InputFile in(data, size);
    moetrain::fuzz::expect_only_errors([&] {
        moetrain::SafetensorsFile f(in.path());
        std::vector<char> buf;
        for (const moetrain::SafetensorsEntry& e : f.tensors()) {
            buf.resize(e.end - e.begin);
            f.read(e, buf.data());
            if (e.dtype == moetrain::DType::f32) (void)f.read_f32(e.name);
        }
        (void)f.metadata_at("format");
    });
    return 0;
}
