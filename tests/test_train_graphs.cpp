// Training with CUDA Graphs (Device::run_recorded) on gives bit-identical losses, norms,
// expert loads, weights and buffers to graphs off, and the steps report eager, eager,
// captured, replayed..., for a dense model, an MoE model and MoE routing v2 (sigmoid router,
// expert bias, routed scaling, a capacity that drops selections). Runs on the backends that record
// graphs (cuda, and the cudasim test module without a GPU).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/train.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

namespace {

// Trains `c` for six steps on `d` with graphs and on the same device with graphs off: the steps
// report eager, eager, captured, replayed..., and the losses, norms, expert loads (dropped
// counts included), weights and buffers (expert biases) are bit-identical. Returns the
// selections the capacity dropped, summed over steps and layers.
int64_t check_graph_steps_equal_eager(const ModelConfig& c, test::DeviceUnderTest& d) {
    std::unique_ptr<Device> plain = test::open_without_graphs(d.id);
    const int B = 2, T = 8, steps = 6;
    TrainOptions o;
    o.lr = 3e-3;
    o.total_steps = steps;
    o.warmup = 2;
    o.clip = 1.0;
    Model mg(*d.dev, c), me(*plain, c);
    rm::randomize_weights(mg, 5);
    rm::randomize_weights(me, 5);
    Trainer tg(mg, o), te(me, o);
    int64_t dropped = 0;
    for (int s = 0; s < steps; ++s) {
        CAPTURE(s);
        const rm::Batch b = rm::random_batch(c.vocab_size, B, T, 100 + static_cast<uint64_t>(s));
        const StepStats g = tg.step(b.x.data(), b.y.data(), B, T);
        const StepStats e = te.step(b.x.data(), b.y.data(), B, T);
        CHECK(e.run == StepRun::eager);
        CHECK(g.run == (s < 2 ? StepRun::eager : s == 2 ? StepRun::captured : StepRun::replayed));
        CHECK(g.loss.loss == e.loss.loss);
        CHECK(g.grad_norm == e.grad_norm);
        const std::vector<ExpertLoad> lg = mg.expert_load(), le = me.expert_load();
        REQUIRE(lg.size() == le.size());
        for (size_t l = 0; l < lg.size(); ++l) {
            CHECK(lg[l].counts == le[l].counts);
            CHECK(lg[l].dropped == le[l].dropped);
            dropped += lg[l].dropped;
        }
    }
    const std::vector<float> pg = mg.get_flat(mg.params_flat());
    const std::vector<float> pe = me.get_flat(me.params_flat());
    REQUIRE(pg.size() == pe.size());
    CHECK(std::memcmp(pg.data(), pe.data(), pg.size() * sizeof(float)) == 0);
    for (const ParamInfo& p : mg.buffers()) CHECK(mg.get_buffer(p.name) == me.get_buffer(p.name));
    return dropped;
}

}  // namespace

TEST_CASE("train: steps replayed from a CUDA graph equal eager steps bit for bit") {
    // Dense, and MoE (grouped expert GEMMs: no host read inside the step, so it is captured).
    for (const ModelConfig& c : {rm::small_config(), rm::with_moe(rm::small_config(), 4, 2)}) {
        for (auto& d : test::test_devices()) {
            if (!test::records_graphs(*d.dev)) continue;  // eager only: nothing to compare
            CAPTURE(d.id);
            CAPTURE(c.moe.has_value());
            check_graph_steps_equal_eager(c, d);
        }
    }
}

TEST_CASE("train: routing v2 steps replayed from a CUDA graph equal eager steps bit for bit") {
    // The sigmoid router, an expert bias, routed scaling and a capacity that drops selections:
    // the router, capacity admission, sort and count accumulation queue no host read inside
    // the captured step and replay exactly.
    ModelConfig c = rm::with_moe(rm::small_config(), 4, 2);
    c.moe->router = RouterKind::sigmoid_topk;
    c.moe->routed_scaling = 2.0;
    c.moe->bias_update_rate = 0.01;
    c.moe->capacity_factor = 0.75;
    for (auto& d : test::test_devices()) {
        if (!test::records_graphs(*d.dev)) continue;  // eager only: nothing to compare
        CAPTURE(d.id);
        CHECK(check_graph_steps_equal_eager(c, d) > 0);  // the capacity path ran in the graphs
    }
}

TEST_CASE("train: a precision switch never replays a graph recorded with the old weights") {
    const ModelConfig c = rm::small_config();
    const rm::Batch b = rm::random_batch(c.vocab_size, 2, 8, 7);
    for (auto& d : test::test_devices()) {
        if (!test::records_graphs(*d.dev)) continue;
        CAPTURE(d.id);
        Model m(*d.dev, c), ref(*d.dev, c);
        m.init_weights(3);
        ref.init_weights(3);
        m.set_precision(Precision::bf16);
        // Eval steps: two warm-ups, a capture, replays (the graph multiplies with the bf16 copy).
        const double l16 = m.forward_loss(b.x.data(), b.y.data(), 2, 8).loss;
        for (int i = 0; i < 4; ++i) CHECK(m.forward_loss(b.x.data(), b.y.data(), 2, 8).loss == l16);
        CHECK(m.last_step_run() == StepRun::replayed);
        // fp32 frees the bf16 copy: the next evals must run fp32 products, not the old graph.
        m.set_precision(Precision::fp32);
        const double l32 = ref.forward_loss(b.x.data(), b.y.data(), 2, 8).loss;
        CHECK(l32 != l16);
        for (int i = 0; i < 4; ++i) CHECK(m.forward_loss(b.x.data(), b.y.data(), 2, 8).loss == l32);
    }
}
