// The model against the independent float64 reference (tests/reference_model.h): forward loss
// terms (rel 1e-5) and analytic gradients vs central finite differences of the reference,
// for every config option of MODEL.md, on every available device.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "finite_difference.h"
#include "moetrain/model.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

namespace {

struct Case {
    std::string name;
    ModelConfig cfg;
};

std::vector<Case> cases() {
    const ModelConfig base = rm::small_config();
    std::vector<Case> v;
    {
        ModelConfig c = base;
        c.n_kv_heads = 1;
        v.push_back({"rmsnorm rope MQA swiglu untied", c});
    }
    {
        ModelConfig c = base;
        c.norm = NormKind::layernorm;
        c.bias = true;
        c.pos = PosKind::learned;
        c.ffn = FfnKind::gelu;
        c.tie_embeddings = true;
        c.n_kv_heads = 4;
        v.push_back({"layernorm+bias learned MHA gelu tied", c});
    }
    {
        ModelConfig c = base;
        c.norm = NormKind::layernorm;
        c.ffn = FfnKind::relu;
        c.rope_theta = 500;
        c.rope_ntk_alpha = 3.0;
        v.push_back({"layernorm rope NTK alpha 3 GQA relu", c});
    }
    {
        ModelConfig c = rm::with_moe(base, 4, 2, 1);
        c.moe->n_shared_experts = 1;
        c.moe->aux_loss_alpha = 0.05;
        c.moe->z_loss_alpha = 0.01;
        v.push_back({"MoE softmax top2 norm_topk shared first_layer=1 aux+z", c});
    }
    {
        ModelConfig c = rm::with_moe(base, 4, 2, 0);
        c.moe->norm_topk_prob = false;
        c.moe->z_loss_alpha = 0.01;
        c.tie_embeddings = true;
        v.push_back({"MoE softmax top2 without norm_topk tied", c});
    }
    {
        ModelConfig c = rm::with_moe(base, 3, 1, 0);
        c.ffn = FfnKind::gelu;
        c.norm = NormKind::layernorm;
        c.bias = true;
        c.pos = PosKind::learned;
        v.push_back({"MoE softmax top1 gelu layernorm+bias learned", c});
    }
    {
        ModelConfig c = rm::with_moe(base, 4, 2, 0);
        c.moe->router = RouterKind::hash;
        c.moe->n_shared_experts = 2;
        c.ffn = FfnKind::relu;
        v.push_back({"MoE hash relu 2 shared", c});
    }
    return v;
}

double rel_err(double got, double want) {
    return std::abs(got - want) / std::max(std::abs(want), 1e-12);
}

constexpr int kB = 2, kT = 8;

// body(case, model) for every case on every test device: a model of the case's config whose
// weights rm::randomize_weights set from `seed`.
template <class F>
void for_each_random_model(uint64_t seed, F body) {
    for (const Case& cs : cases()) {
        CAPTURE(cs.name);
        test::for_each_test_device([&](Device& dev) {
            Model m(dev, cs.cfg);
            rm::randomize_weights(m, seed);
            body(cs, m);
        });
    }
}

}  // namespace

TEST_CASE("model: forward loss terms match the float64 reference (rel 1e-5)") {
    for_each_random_model(7, [&](const Case& cs, Model& m) {
        const rm::Batch b = rm::random_batch(cs.cfg.vocab_size, kB, kT, 11, 5);
        const LossStats ours = m.forward_loss(b.x.data(), b.y.data(), kB, kT);
        const rm::Loss ref = rm::loss(
            cs.cfg, rm::weights_from(m.params(), m.get_flat(m.params_flat())), b.x, b.y, kB, kT);
        CHECK(rel_err(ours.ce, ref.ce) < 1e-5);
        CHECK(std::abs(ours.aux - ref.aux) <= 1e-5 * std::abs(ref.aux) + 1e-9);
        CHECK(std::abs(ours.z - ref.z) <= 1e-5 * std::abs(ref.z) + 1e-9);
        CHECK(rel_err(ours.loss, ref.loss) < 1e-5);
        CHECK(ours.tokens == kB * kT - (kB * kT) / 5);
        // forward_backward reports the same loss as forward_loss.
        const LossStats fb = m.forward_backward(b.x.data(), b.y.data(), kB, kT);
        CHECK(rel_err(fb.loss, ours.loss) < 1e-6);
    });
}

// Tolerance and step: tests/finite_difference.h.
TEST_CASE("model: analytic gradients of every tensor match float64 finite differences") {
    for_each_random_model(3, [&](const Case& cs, Model& m) {
        const rm::Batch b = rm::random_batch(cs.cfg.vocab_size, kB, kT, 5, 7);
        m.zero_grads();
        m.forward_backward(b.x.data(), b.y.data(), kB, kT, 1.0f);
        const std::vector<float> grads = m.get_flat(m.grads_flat());
        rm::Weights w = rm::weights_from(m.params(), m.get_flat(m.params_flat()));
        std::mt19937_64 rng(99);
        for (const ParamInfo& p : m.params()) {
            CAPTURE(p.name);
            const double gmax = test::max_abs_grad(grads, p);
            std::vector<int64_t> sample;
            if (p.numel() <= 16) {
                for (int64_t i = 0; i < p.numel(); ++i) sample.push_back(i);
            } else {
                std::uniform_int_distribution<int64_t> pick(0, p.numel() - 1);
                for (int s = 0; s < 6; ++s) sample.push_back(pick(rng));
            }
            double worst = 0;
            for (int64_t i : sample) {
                const double fd = test::central_difference(w[p.name][static_cast<size_t>(i)], [&] {
                    return rm::loss(cs.cfg, w, b.x, b.y, kB, kT).loss;
                });
                const double ours = grads[static_cast<size_t>(p.offset + i)];
                const double allowed = test::fd_tolerance(fd, gmax);
                worst = std::max(worst, std::abs(ours - fd) / allowed);
                if (std::abs(ours - fd) > allowed) {
                    CAPTURE(i);
                    CAPTURE(ours);
                    CAPTURE(fd);
                    CHECK(std::abs(ours - fd) <= allowed);
                }
            }
            CHECK(worst <= 1.0);
        }
    });
}
