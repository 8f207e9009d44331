// Generation with CUDA Graphs (Device::run_recorded) on gives the same tokens as graphs off,
// and the decode steps report eager, eager, captured, replayed... (the prefill and the first
// draw run eagerly; each later step is one recorded step reading its position and Philox step
// from device memory). A dense config with rope, a dense one with learned positions and an MoE
// one (softmax top-k router, shared expert: the grouped GEMMs read their sizes on the device),
// batched prompts, temperature / top-k sampling; a second generation gets new buffers, hence a
// new graph. Runs on the backends that record graphs (cuda, and the cudasim test module
// without a GPU).
#include <doctest/doctest.h>

#include <vector>

#include "moetrain/backend.h"
#include "moetrain/generate.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

namespace {

// Generates for B = 2 prompts and records how each step ran (step 0: the prefill).
std::vector<std::vector<int32_t>> generate_recording(Model& m, const GenerateOptions& o,
                                                     std::vector<StepRun>& runs) {
    const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4, 5, 6}};
    runs.clear();
    return generate_batch(m, prompts, o, [&](int64_t, std::span<const int32_t>) {
        runs.push_back(m.last_step_run());
        return true;
    });
}

}  // namespace

TEST_CASE(
    "generate: decode steps replayed from a CUDA graph equal eager decoding token for token") {
    ModelConfig learned = rm::small_config();
    learned.pos = PosKind::learned;
    learned.norm = NormKind::layernorm;
    learned.bias = true;
    ModelConfig moe = rm::with_moe(rm::small_config(), 4, 2, 1);
    moe.moe->n_shared_experts = 1;
    for (const ModelConfig& c : {rm::small_config(), learned, moe}) {
        for (auto& d : test::test_devices()) {
            if (!test::records_graphs(*d.dev)) continue;  // eager only: nothing to compare
            CAPTURE(d.id);
            CAPTURE(c.pos == PosKind::learned);
            CAPTURE(c.moe.has_value());
            std::unique_ptr<Device> plain = test::open_without_graphs(d.id);
            Model mg(*d.dev, c), me(*plain, c);
            rm::randomize_weights(mg, 5);
            rm::randomize_weights(me, 5);
            GenerateOptions o;
            o.max_new_tokens = 8;
            o.temperature = 0.9f;
            o.top_k = 6;
            o.seed = 11;
            const std::vector<StepRun> want = {
                StepRun::eager,    StepRun::eager,    StepRun::eager,    StepRun::captured,
                StepRun::replayed, StepRun::replayed, StepRun::replayed, StepRun::replayed};
            for (int round = 0; round < 2; ++round) {  // new buffers: captured again
                CAPTURE(round);
                std::vector<StepRun> rg, re;
                const auto g = generate_recording(mg, o, rg);
                const auto e = generate_recording(me, o, re);
                CHECK(g == e);
                CHECK(rg == want);
                CHECK(re == std::vector<StepRun>(want.size(), StepRun::eager));
                o.seed += 1;
            }
        }
    }
}
