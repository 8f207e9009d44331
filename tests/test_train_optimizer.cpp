// Optimizer, schedule and clipping against values computed by hand on the host: lr_at at
// several steps, two AdamW steps (bias corrections, decoupled decay only on rank >= 2,
// global-norm clipping) and one SGD step, and the non-finite guard.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "moetrain/train.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

TEST_CASE("train: lr_at is linear warmup then cosine to min_lr (nanoGPT)") {
    TrainOptions o;
    o.lr = 1e-3;
    o.warmup = 10;
    o.total_steps = 110;  // min_lr defaults to lr / 10
    CHECK(lr_at(o, 0) == doctest::Approx(1e-4));
    CHECK(lr_at(o, 4) == doctest::Approx(5e-4));
    CHECK(lr_at(o, 9) == doctest::Approx(1e-3));
    CHECK(lr_at(o, 10) == doctest::Approx(1e-3));  // first step after warmup uses lr
    CHECK(lr_at(o, 35) ==
          doctest::Approx(1e-4 + 0.5 * 9e-4 * (1 + std::cos(std::numbers::pi / 4))));
    CHECK(lr_at(o, 60) == doctest::Approx(5.5e-4));
    CHECK(lr_at(o, 110) == doctest::Approx(1e-4));
    CHECK(lr_at(o, 500) == doctest::Approx(1e-4));  // past the schedule: min_lr
    TrainOptions c;
    c.lr = 2e-3;
    c.min_lr = 2e-3;
    c.total_steps = 50;
    for (int64_t i : {0, 7, 49}) CHECK(lr_at(c, i) == doctest::Approx(2e-3));
    TrainOptions one;  // W = 0, S = 1
    CHECK(lr_at(one, 0) == doctest::Approx(3e-4));
}

namespace {

double norm_of(const std::vector<float>& g) {
    double s = 0;
    for (float v : g) s += double{v} * v;
    return std::sqrt(s);
}

std::vector<float> grads_at(Model& m, const rm::Batch& b, int B, int T) {
    m.zero_grads();
    m.forward_backward(b.x.data(), b.y.data(), B, T, 1.0f);
    return m.get_flat(m.grads_flat());
}

// Which flat elements belong to decayed tensors.
std::vector<bool> decay_mask(const Model& m) {
    std::vector<bool> d(static_cast<size_t>(m.num_params()), false);
    for (const auto& p : m.params())
        for (int64_t i = 0; i < p.numel(); ++i) d[static_cast<size_t>(p.offset + i)] = p.decay;
    return d;
}

}  // namespace

TEST_CASE("train: two AdamW steps with clipping equal the hand computation") {
    const ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 1);
    test::for_each_test_device([&](Device& dev) {
        Model m(dev, c);
        rm::randomize_weights(m, 4);
        const int B = 2, T = 8;
        const rm::Batch b = rm::random_batch(c.vocab_size, B, T, 9);
        TrainOptions o;
        o.lr = 1e-2;
        o.min_lr = 1e-2;
        o.wd = 0.1;
        o.clip = 0.05;
        o.total_steps = 2;
        Trainer tr(m, o);
        const std::vector<bool> decay = decay_mask(m);
        std::vector<double> mom(decay.size(), 0.0), vel(decay.size(), 0.0);
        std::vector<float> p = m.get_flat(m.params_flat());
        for (int s = 1; s <= 2; ++s) {
            CAPTURE(s);
            const std::vector<float> g = grads_at(m, b, B, T);
            const double n = norm_of(g);
            REQUIRE(n > o.clip);  // the clipping path is exercised
            const StepStats st = tr.step(b.x.data(), b.y.data(), B, T);
            CHECK(st.step == s);
            CHECK(st.lr == doctest::Approx(1e-2));
            CHECK(st.grad_norm == doctest::Approx(n).epsilon(1e-5));
            const double coef = o.clip / (n + 1e-6);
            const double bc1 = 1 - std::pow(0.9, s), bc2 = 1 - std::pow(0.95, s);
            const std::vector<float> got = m.get_flat(m.params_flat());
            double worst = 0;
            for (size_t i = 0; i < p.size(); ++i) {
                const double gi = g[i] * coef;
                mom[i] = 0.9 * mom[i] + 0.1 * gi;
                vel[i] = 0.95 * vel[i] + 0.05 * gi * gi;
                const double want =
                    p[i] - o.lr * ((mom[i] / bc1) / (std::sqrt(vel[i] / bc2) + 1e-8) +
                                   (decay[i] ? 0.1 : 0.0) * p[i]);
                worst = std::max(worst, std::abs(got[i] - want));
            }
            CHECK(worst < 2e-6);
            const std::vector<float> m1 = m.get_flat(tr.moment1());
            double mworst = 0;
            for (size_t i = 0; i < p.size(); ++i)
                mworst = std::max(mworst, std::abs(m1[i] - mom[i]));
            CHECK(mworst < 1e-7);
            p = got;
        }
        CHECK(tr.steps_done() == 2);
    });
}

TEST_CASE("train: one SGD step without clipping is p - lr g") {
    const ModelConfig c = rm::small_config();
    test::for_each_test_device([&](Device& dev) {
        Model m(dev, c);
        rm::randomize_weights(m, 6);
        const rm::Batch b = rm::random_batch(c.vocab_size, 2, 8, 1);
        TrainOptions o;
        o.optimizer = OptimizerKind::sgd;
        o.lr = 0.5;
        o.min_lr = 0.5;
        o.clip = 0;
        Trainer tr(m, o);
        CHECK(tr.moment1().empty());
        const std::vector<float> p = m.get_flat(m.params_flat());
        const std::vector<float> g = grads_at(m, b, 2, 8);
        tr.step(b.x.data(), b.y.data(), 2, 8);
        const std::vector<float> got = m.get_flat(m.params_flat());
        double worst = 0;
        for (size_t i = 0; i < p.size(); ++i)
            worst = std::max(worst, std::abs(got[i] - (p[i] - 0.5 * double{g[i]})));
        CHECK(worst < 1e-6);
    });
}

TEST_CASE("train: a non-finite loss throws before the update") {
    const ModelConfig c = rm::small_config();
    test::for_each_test_device([&](Device& dev) {
        Model m(dev, c);
        m.init_weights(1);
        std::vector<float> w = m.get_param("lm_head.weight");
        w[3] = std::numeric_limits<float>::infinity();
        m.set_param("lm_head.weight", w);
        const std::vector<float> before = m.get_flat(m.params_flat());
        TrainOptions o;
        Trainer tr(m, o);
        const rm::Batch b = rm::random_batch(c.vocab_size, 1, 8, 2);
        CHECK_THROWS_WITH_AS(tr.step(b.x.data(), b.y.data(), 1, 8),
                             doctest::Contains("non-finite loss at step 1"), Error);
        const std::vector<float> after = m.get_flat(m.params_flat());
        CHECK(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) == 0);
        CHECK(tr.steps_done() == 0);
    });
}

TEST_CASE("train: invalid options are rejected by name") {
    const ModelConfig c = rm::small_config();
    auto dev = open_device("cpu");
    Model m(*dev, c);
    TrainOptions o;
    o.accum = 0;
    CHECK_THROWS_WITH_AS(Trainer(m, o), doctest::Contains("accum"), Error);
    o = {};
    o.b2 = 1.0;
    CHECK_THROWS_WITH_AS(Trainer(m, o), doctest::Contains("b2"), Error);
}
