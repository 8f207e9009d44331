// The MODEL.md v2 routing options on the whole model, on every available device:
//  - loss terms against the float64 reference (tests/reference_model.h) for the sigmoid router
//    with an expert bias and routed scaling, and for a capacity that drops selections in a
//    training micro-batch (the Trainer's passes), while eval and Model::forward_backward stay
//    dropless;
//  - analytic gradients through the capacity path against central differences of the
//    reference: the admission depends only on the selections, which the 1e-6 steps do not
//    flip, so the pattern of dropped selections is fixed (checked) and the differences are
//    meaningful;
//  - the expert-bias update of a Trainer step with 2 micro-batches, bit for bit against
//    fp32(double(b) + u sign(c_mean - c_e)) of the summed counts;
//  - cross-backend: 12 AdamW steps with all three options on give the same losses, loads,
//    dropped counts and biases as the reference device.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <random>

#include "finite_difference.h"
#include "model/model_access.h"
#include "model/model_impl.h"
#include "moetrain/train.h"
#include "reference_model.h"
#include "reference_ops.h"
#include "test_xbackend_util.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

namespace {

constexpr int kB = 2, kT = 8;

// E 4, top-2 from layer 0 with aux and z losses; the options on top.
ModelConfig routed(RouterKind router, double scaling, double rate, double capacity) {
    ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 0);
    c.moe->router = router;
    c.moe->routed_scaling = scaling;
    c.moe->bias_update_rate = rate;
    c.moe->capacity_factor = capacity;
    c.moe->aux_loss_alpha = 0.05;
    c.moe->z_loss_alpha = 0.01;
    c.moe->n_shared_experts = 1;
    return c;
}

// The reference's weights: parameters and the expert biases.
rm::Weights all_weights(const Model& m) {
    rm::Weights w = rm::weights_from(m.params(), m.get_flat(m.params_flat()));
    for (const ParamInfo& b : m.buffers()) {
        const std::vector<float> v = m.get_buffer(b.name);
        w[b.name] = std::vector<double>(v.begin(), v.end());
    }
    return w;
}

// Expert biases with a spread comparable to the score gaps, so they move selections.
void randomize_bias(Model& m, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-0.3, 0.3);
    for (const ParamInfo& b : m.buffers()) {
        std::vector<float> v(static_cast<size_t>(b.numel()));
        for (float& x : v) x = static_cast<float>(u(rng));
        m.set_buffer(b.name, v);
    }
}

// A Trainer micro-batch (capacity applies) with gradients added, as TrainPasses queues it.
LossStats train_pass(Model& m, const rm::Batch& b) {
    ModelImpl& im = ModelAccess::impl(m);
    im.passes.reset_stats();
    const int64_t n =
        im.passes.queue_micro_batch(b.x.data(), b.y.data(), kB, kT, 1.0f, 1.0f, true, true);
    return loss_from_stats(im.passes.read_stats(), n);
}

int64_t dropped(const Model& m) {
    int64_t d = 0;
    for (const ExpertLoad& l : m.expert_load()) d += l.dropped;
    return d;
}

bool close(double got, double want, double rel) {
    return std::abs(got - want) <= rel * std::abs(want) + 1e-9;
}

}  // namespace

TEST_CASE("model: sigmoid router with expert bias and routed scaling matches the reference") {
    for (double scaling : {1.0, 2.5}) {
        const ModelConfig c = routed(RouterKind::sigmoid_topk, scaling, 1e-3, 0.0);
        for (auto& d : test::test_devices()) {
            CAPTURE(d.id);
            CAPTURE(scaling);
            Model m(*d.dev, c);
            rm::randomize_weights(m, 7);
            REQUIRE(m.buffers().size() == 2);
            CHECK(m.get_buffer("layers.0.moe.router.expert_bias") == std::vector<float>(4, 0.0f));
            randomize_bias(m, 3);
            const rm::Batch b = rm::random_batch(c.vocab_size, kB, kT, 11, 5);
            const LossStats ours = m.forward_loss(b.x.data(), b.y.data(), kB, kT);
            const rm::Loss ref = rm::loss(c, all_weights(m), b.x, b.y, kB, kT);
            CHECK(close(ours.ce, ref.ce, 1e-5));
            CHECK(close(ours.aux, ref.aux, 1e-5));
            CHECK(close(ours.z, ref.z, 1e-5));
            CHECK(ref.aux > 0);
            // The bias takes part in the selection: without it the reference differs.
            rm::Weights unbiased = all_weights(m);
            for (const ParamInfo& p : m.buffers()) unbiased[p.name].assign(4, 0.0);
            CHECK(std::abs(rm::loss(c, unbiased, b.x, b.y, kB, kT).ce - ref.ce) > 1e-6);
        }
    }
}

TEST_CASE("model: capacity drops in training micro-batches only, as the reference does") {
    // C = ceil(((0.6 * 16) * 2) / 4) = 5 rows per expert for 32 selections: drops for sure.
    for (RouterKind router : {RouterKind::softmax_topk, RouterKind::sigmoid_topk}) {
        const ModelConfig c = routed(router, 1.5, 0.0, 0.6);
        for (auto& d : test::test_devices()) {
            CAPTURE(d.id);
            CAPTURE(to_string(router));
            Model m(*d.dev, c);
            rm::randomize_weights(m, 5);
            const rm::Batch b = rm::random_batch(c.vocab_size, kB, kT, 13, 7);
            const rm::Weights w = all_weights(m);
            int64_t ref_dropped = 0;
            const rm::Loss ref = rm::loss(c, w, b.x, b.y, kB, kT, nullptr, true, &ref_dropped);
            REQUIRE(ref_dropped > 0);
            m.zero_grads();
            const LossStats ours = train_pass(m, b);
            CHECK(dropped(m) == ref_dropped);
            CHECK(close(ours.ce, ref.ce, 1e-5));
            CHECK(close(ours.aux, ref.aux, 1e-5));  // f_e counts selections before dropping
            CHECK(close(ours.z, ref.z, 1e-5));
            // Eval and Model::forward_backward are dropless.
            const rm::Loss dropless = rm::loss(c, w, b.x, b.y, kB, kT);
            CHECK(std::abs(dropless.ce - ref.ce) > 1e-6);
            CHECK(close(m.forward_loss(b.x.data(), b.y.data(), kB, kT).ce, dropless.ce, 1e-5));
            CHECK(dropped(m) == 0);
            CHECK(close(m.forward_backward(b.x.data(), b.y.data(), kB, kT).ce, dropless.ce, 1e-5));
            CHECK(dropped(m) == 0);
        }
    }
}

// Tolerance and step: tests/finite_difference.h.
TEST_CASE("model: gradients through the capacity path match float64 finite differences") {
    const ModelConfig c = routed(RouterKind::sigmoid_topk, 2.0, 1e-3, 0.6);
    for (auto& d : test::test_devices()) {
        CAPTURE(d.id);
        Model m(*d.dev, c);
        rm::randomize_weights(m, 3);
        randomize_bias(m, 9);
        const rm::Batch b = rm::random_batch(c.vocab_size, kB, kT, 5, 7);
        m.zero_grads();
        train_pass(m, b);
        const int64_t ours_dropped = dropped(m);
        const std::vector<float> grads = m.get_flat(m.grads_flat());
        rm::Weights w = all_weights(m);
        int64_t base_dropped = 0;
        rm::loss(c, w, b.x, b.y, kB, kT, nullptr, true, &base_dropped);
        REQUIRE(base_dropped > 0);
        CHECK(ours_dropped == base_dropped);
        std::mt19937_64 rng(99);
        for (const ParamInfo& p : m.params()) {
            CAPTURE(p.name);
            const double gmax = test::max_abs_grad(grads, p);
            std::uniform_int_distribution<int64_t> pick(0, p.numel() - 1);
            for (int s = 0; s < 5; ++s) {
                const int64_t i = pick(rng);
                std::vector<int64_t> drops;  // at v + h, then v - h
                const double fd = test::central_difference(w[p.name][static_cast<size_t>(i)], [&] {
                    int64_t dr = 0;
                    const double l = rm::loss(c, w, b.x, b.y, kB, kT, nullptr, true, &dr).loss;
                    drops.push_back(dr);
                    return l;
                });
                // The admission pattern held (no selection moved).
                REQUIRE(drops == std::vector<int64_t>{base_dropped, base_dropped});
                const double ours = grads[static_cast<size_t>(p.offset + i)];
                CAPTURE(i);
                CAPTURE(ours);
                CAPTURE(fd);
                CHECK(std::abs(ours - fd) <= test::fd_tolerance(fd, gmax));
            }
        }
    }
}

TEST_CASE("model: the expert bias moves by u sign(c_mean - c_e) of the step's counts") {
    const ModelConfig c = routed(RouterKind::sigmoid_topk, 1.0, 0.0123, 1.0);
    for (auto& d : test::test_devices()) {
        CAPTURE(d.id);
        Model m(*d.dev, c);
        rm::randomize_weights(m, 21);
        randomize_bias(m, 4);
        TrainOptions o;
        o.lr = 0;  // the selections of the step are those of the weights before it
        o.total_steps = 2;
        o.accum = 2;
        Trainer tr(m, o);
        const rm::Batch b0 = rm::random_batch(c.vocab_size, kB, kT, 31),
                        b1 = rm::random_batch(c.vocab_size, kB, kT, 32);
        // Each micro-batch's selections (before dropping) from a dropless forward.
        std::vector<std::vector<int32_t>> counts(2, std::vector<int32_t>(4, 0));
        for (const rm::Batch* b : {&b0, &b1}) {
            m.forward_loss(b->x.data(), b->y.data(), kB, kT);
            for (size_t l = 0; l < 2; ++l)
                for (size_t e = 0; e < 4; ++e) counts[l][e] += m.expert_load()[l].counts[e];
        }
        std::vector<std::vector<double>> want(2);
        for (size_t l = 0; l < 2; ++l) {
            const std::vector<float> b = m.get_buffer(m.buffers()[l].name);
            want[l].assign(b.begin(), b.end());
            ref::expert_bias_update(want[l], counts[l], 4, c.moe->bias_update_rate);
        }
        std::vector<int32_t> xs = b0.x, ys = b0.y;
        xs.insert(xs.end(), b1.x.begin(), b1.x.end());
        ys.insert(ys.end(), b1.y.begin(), b1.y.end());
        tr.step(xs.data(), ys.data(), kB, kT);
        for (size_t l = 0; l < 2; ++l) {
            CAPTURE(l);
            const std::vector<float> got = m.get_buffer(m.buffers()[l].name);
            for (size_t e = 0; e < 4; ++e)
                CHECK(std::bit_cast<uint32_t>(got[e]) ==
                      std::bit_cast<uint32_t>(static_cast<float>(want[l][e])));
            CHECK(m.expert_load()[l].bias_min == *std::min_element(got.begin(), got.end()));
            CHECK(m.expert_load()[l].bias_max == *std::max_element(got.begin(), got.end()));
        }
    }
}

TEST_CASE("xbackend: sigmoid + expert bias + scaling + capacity: 12 AdamW steps match cpu") {
    ModelConfig c = xbackend::base_config();
    c.n_kv_heads = 2;
    c.moe = xbackend::moe_block(4, 2, RouterKind::sigmoid_topk);
    c.moe->routed_scaling = 2.0;
    c.moe->bias_update_rate = 0.01;
    c.moe->capacity_factor = 0.75;
    c.moe->aux_loss_alpha = 0.01;
    c.moe->z_loss_alpha = 0.001;
    constexpr int kSteps = 12;
    for (const xbackend::DevicePair& pr : xbackend::device_pairs("MoE routing v2")) {
        CAPTURE(pr.label());
        const auto stream = xbackend::token_stream(c.vocab_size, 4096, 5);
        xbackend::ModelPair mp(pr, c);
        mp.ref.init_weights(11);
        mp.other.init_weights(11);
        Trainer tr_ref(mp.ref, xbackend::curve_options(kSteps)),
            tr_other(mp.other, xbackend::curve_options(kSteps));
        const auto want = xbackend::train_steps(tr_ref, stream, 0, kSteps);
        const auto got = xbackend::train_steps(tr_other, stream, 0, kSteps);
        int64_t drops = 0;
        for (int s = 0; s < kSteps; ++s) {
            CAPTURE(s);
            CHECK(close(got[s].loss, want[s].loss, 1e-4));
            for (size_t l = 0; l < want[s].loads.size(); ++l) {
                CHECK(got[s].loads[l].counts == want[s].loads[l].counts);
                CHECK(got[s].loads[l].dropped == want[s].loads[l].dropped);
                CHECK(got[s].loads[l].bias_min == want[s].loads[l].bias_min);
                CHECK(got[s].loads[l].bias_max == want[s].loads[l].bias_max);
                drops += want[s].loads[l].dropped;
            }
        }
        CHECK(drops > 0);
        CHECK(want.back().loads[0].bias_max > want.back().loads[0].bias_min);
        for (const ParamInfo& b : mp.ref.buffers())
            CHECK(mp.other.get_buffer(b.name) == mp.ref.get_buffer(b.name));
    }
}
