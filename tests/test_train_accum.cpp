// Gradient accumulation (A micro-batches = one batch A times larger) and run-to-run
// determinism of training.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "moetrain/train.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

namespace {

// MoE with z-loss but no aux loss: aux is not linear in the batch (f_e * P_e), ce and z are.
ModelConfig accum_config() {
    ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 1);
    c.moe->aux_loss_alpha = 0.0;
    c.moe->z_loss_alpha = 0.01;
    c.moe->n_shared_experts = 1;
    return c;
}

}  // namespace

TEST_CASE("train: accumulating 2 half batches equals one full batch") {
    const ModelConfig c = accum_config();
    test::for_each_test_device([&](Device& dev) {
        const int B = 4, T = 8;
        const rm::Batch b = rm::random_batch(c.vocab_size, B, T, 21);
        // SGD: the update is linear in the gradient, so rounding differences stay rounding-sized
        // (AdamW's g / sqrt(v) would amplify them for near-zero gradients).
        TrainOptions o;
        o.optimizer = OptimizerKind::sgd;
        o.lr = 0.1;
        o.total_steps = 3;
        Model full(dev, c), half(dev, c);
        rm::randomize_weights(full, 8);
        rm::randomize_weights(half, 8);
        Trainer t1(full, o);
        o.accum = 2;
        Trainer t2(half, o);
        for (int s = 0; s < 3; ++s) {
            CAPTURE(s);
            // Rows 0-1 and 2-3 are the two micro-batches: the same ids, consecutive in memory.
            const StepStats a = t1.step(b.x.data(), b.y.data(), B, T);
            const StepStats h = t2.step(b.x.data(), b.y.data(), B / 2, T);
            CHECK(h.loss.ce == doctest::Approx(a.loss.ce).epsilon(1e-6));
            CHECK(h.loss.z == doctest::Approx(a.loss.z).epsilon(1e-5));
            CHECK(h.loss.tokens == a.loss.tokens);
            CHECK(h.grad_norm == doctest::Approx(a.grad_norm).epsilon(1e-5));
        }
        const std::vector<float> pf = full.get_flat(full.params_flat());
        const std::vector<float> ph = half.get_flat(half.params_flat());
        double worst = 0;
        for (size_t i = 0; i < pf.size(); ++i)
            worst = std::max(worst, double{std::abs(pf[i] - ph[i])});
        CHECK(worst < 1e-6);
    });
}

TEST_CASE("train: the same seed gives bit-identical losses over 5 steps") {
    ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 1);
    c.moe->z_loss_alpha = 0.001;
    test::for_each_test_device([&](Device& dev) {
        std::vector<std::vector<double>> runs;
        std::vector<std::vector<float>> finals;
        for (int run = 0; run < 2; ++run) {
            Model m(dev, c);
            m.init_weights(1234);
            TrainOptions o;
            o.lr = 3e-3;
            o.total_steps = 5;
            o.warmup = 2;
            Trainer tr(m, o);
            std::vector<double> losses;
            for (int s = 0; s < 5; ++s) {
                const rm::Batch b = rm::random_batch(c.vocab_size, 2, 8, 100 + s);
                const StepStats st = tr.step(b.x.data(), b.y.data(), 2, 8);
                losses.push_back(st.loss.loss);
                losses.push_back(st.grad_norm);
            }
            runs.push_back(losses);
            finals.push_back(m.get_flat(m.params_flat()));
        }
        CHECK(runs[0] == runs[1]);
        CHECK(std::memcmp(finals[0].data(), finals[1].data(), finals[0].size() * sizeof(float)) ==
              0);
    });
}

TEST_CASE("train: training lowers the loss on a repeated batch") {
    const ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 1);
    test::for_each_test_device([&](Device& dev) {
        Model m(dev, c);
        m.init_weights(3);
        TrainOptions o;
        o.lr = 1e-2;
        o.total_steps = 20;
        Trainer tr(m, o);
        const rm::Batch b = rm::random_batch(c.vocab_size, 2, 8, 5);
        const double first = tr.step(b.x.data(), b.y.data(), 2, 8).loss.ce;
        double last = first;
        for (int s = 1; s < 20; ++s) last = tr.step(b.x.data(), b.y.data(), 2, 8).loss.ce;
        CHECK(last < first - 0.5);
    });
}
