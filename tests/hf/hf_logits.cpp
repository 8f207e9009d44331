// Test helper for tests/hf/hf_interop_tests.py: the logits moetrain computes for one token
// sequence, so that the Python side can compare them with transformers'.
//   moetrain_hf_logits CKPT OUT.f32 ID...   writes [T, V] float32 (little-endian) to OUT.f32
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/model.h"

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s CKPT OUT.f32 ID...\n", argv[0]);
        return 2;
    }
    try {
        const std::string dir = moetrain::resolve_checkpoint(argv[1]);
        const moetrain::CheckpointInfo info = moetrain::read_checkpoint_info(dir);
        auto device = moetrain::open_device("cpu", moetrain::DeviceOptions{});
        moetrain::Model model(*device, info.config);
        moetrain::load_weights(dir, model);
        std::vector<int32_t> ids;
        for (int i = 3; i < argc; ++i) ids.push_back(std::atoi(argv[i]));
        const std::vector<float> logits =
            model.forward_logits(ids.data(), 1, static_cast<int>(ids.size()));
        FILE* f = std::fopen(argv[2], "wb");
        if (!f || std::fwrite(logits.data(), sizeof(float), logits.size(), f) != logits.size() ||
            std::fclose(f) != 0) {
            std::fprintf(stderr, "cannot write %s\n", argv[2]);
            return 1;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "moetrain_hf_logits: %s\n", e.what());
        return 1;
    }
    return 0;
}
