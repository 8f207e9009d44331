// MoE routing v2 inside a captured step: with the sigmoid router, an expert bias, routed
// scaling and a capacity that drops selections, training with CUDA Graphs on gives bit-identical
// losses, norms, weights, expert loads (dropped counts included) and expert biases to graphs
// off, and the steps report eager, eager, captured, replayed... So the router, capacity
// admission, sort and count accumulation queue no host read and replay exactly. Runs on the
// backends that record graphs (cuda, and the cudasim test module without a GPU).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "moetrain/train.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

TEST_CASE("train: routing v2 steps replayed from a CUDA graph equal eager steps bit for bit") {
    ModelConfig c = rm::with_moe(rm::small_config(), 4, 2);
    c.moe->router = RouterKind::sigmoid_topk;
    c.moe->routed_scaling = 2.0;
    c.moe->bias_update_rate = 0.01;
    c.moe->capacity_factor = 0.75;
    for (auto& d : test::test_devices()) {
        if (!test::records_graphs(*d.dev)) continue;  // eager only: nothing to compare
        CAPTURE(d.id);
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
            const std::vector<ExpertLoad>& lg = mg.expert_load();
            const std::vector<ExpertLoad>& le = me.expert_load();
            REQUIRE(lg.size() == le.size());
            for (size_t l = 0; l < lg.size(); ++l) {
                CHECK(lg[l].counts == le[l].counts);
                CHECK(lg[l].dropped == le[l].dropped);
                dropped += lg[l].dropped;
            }
        }
        CHECK(dropped > 0);  // the capacity path ran inside the graphs
        const std::vector<float> pg = mg.get_flat(mg.params_flat());
        const std::vector<float> pe = me.get_flat(me.params_flat());
        REQUIRE(pg.size() == pe.size());
        CHECK(std::memcmp(pg.data(), pe.data(), pg.size() * sizeof(float)) == 0);
        for (const ParamInfo& b : mg.buffers())
            CHECK(mg.get_buffer(b.name) == me.get_buffer(b.name));
    }
}
