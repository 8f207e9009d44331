// Training with CUDA Graphs (Device::run_recorded) on gives bit-identical losses, norms and
// weights to graphs off, and the steps report eager, eager, captured, replayed..., for a dense
// and an MoE model. Runs on the backends that record graphs (cuda, and the cudasim test module
// without a GPU).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/train.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

TEST_CASE("train: steps replayed from a CUDA graph equal eager steps bit for bit") {
    // Dense, and MoE (grouped expert GEMMs: no host read inside the step, so it is captured).
    for (const ModelConfig& c : {rm::small_config(), rm::with_moe(rm::small_config(), 4, 2)}) {
        for (auto& d : test::test_devices()) {
            if (!test::records_graphs(*d.dev)) continue;  // eager only: nothing to compare
            CAPTURE(d.id);
            CAPTURE(c.moe.has_value());
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
            for (int s = 0; s < steps; ++s) {
                CAPTURE(s);
                const rm::Batch b =
                    rm::random_batch(c.vocab_size, B, T, 100 + static_cast<uint64_t>(s));
                const StepStats g = tg.step(b.x.data(), b.y.data(), B, T);
                const StepStats e = te.step(b.x.data(), b.y.data(), B, T);
                CHECK(e.run == StepRun::eager);
                CHECK(g.run == (s < 2    ? StepRun::eager
                                : s == 2 ? StepRun::captured
                                         : StepRun::replayed));
                CHECK(g.loss.loss == e.loss.loss);
                CHECK(g.grad_norm == e.grad_norm);
            }
            const std::vector<float> pg = mg.get_flat(mg.params_flat());
            const std::vector<float> pe = me.get_flat(me.params_flat());
            REQUIRE(pg.size() == pe.size());
            CHECK(std::memcmp(pg.data(), pe.data(), pg.size() * sizeof(float)) == 0);
        }
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
