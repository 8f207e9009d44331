// The files `moetrain import` reads from a transformers model directory, as it reads them.
// The first byte picks the file the rest of the input becomes:
//   0: config.json (hf_config_from_json: architecture, sizes, refused settings);
//   1: model.safetensors.index.json beside two valid shards (HfWeights: every tensor in
//      exactly the shard the index names), then every tensor read as f32;
//   2: model.safetensors alone (HfWeights over its header), then every tensor read as f32.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "io/hf_mapping.h"
#include "io/hf_weights.h"
#include "moetrain/safetensors.h"

namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) std::abort();
}

// A directory of this process holding two valid shards: "a" and "b" (F32 [2]) in the first,
// "c" (BF16 [3]) in the second.
const fs::path& model_dir() {
    static const fs::path dir = [] {
        fs::path d =
            fs::temp_directory_path() / ("moetrain-fuzz-import-" + std::to_string(::getpid()));
        fs::create_directories(d);
        std::atexit([] {
            std::error_code ec;
            fs::remove_all(model_dir(), ec);
        });
        static const float f[4] = {1, 2, 3, 4};
        static const uint16_t h[3] = {0x3F80, 0x4000, 0x4040};
        moetrain::SafetensorsWriter w1;
        w1.add("a", moetrain::DType::f32, {2}, f);
        w1.add("b", moetrain::DType::f32, {2}, f + 2);
        w1.write((d / "model-00001-of-00002.safetensors").string());
        moetrain::SafetensorsWriter w2;
        w2.add("c", moetrain::DType::bf16, {3}, h);
        w2.write((d / "model-00002-of-00002.safetensors").string());
        return d;
    }();
    return dir;
}

void read_every_tensor(const moetrain::io::HfWeights& w) {
    for (const std::string& name : w.names()) (void)w.read_f32(name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    const fs::path& dir = model_dir();
    const fs::path index = dir / "model.safetensors.index.json", single = dir / "model.safetensors";
    std::error_code ec;
    switch (data[0] % 3) {
        case 0:
            moetrain::fuzz::expect_only_errors(
                [&] { (void)moetrain::io::hf_config_from_json(rest, "config.json"); });
            break;
        case 1:
            fs::remove(single, ec);
            write_file(index, rest);
            moetrain::fuzz::expect_only_errors(
                [&] { read_every_tensor(moetrain::io::HfWeights(dir.string())); });
            break;
        default:
            fs::remove(index, ec);
            write_file(single, rest);
            moetrain::fuzz::expect_only_errors(
                [&] { read_every_tensor(moetrain::io::HfWeights(dir.string())); });
            break;
    }
    return 0;
}
