// MoE routing at the model level: hash routing targets (mix32 values computed by hand with
// python), top-k tie-breaking with a uniform router, the aux / z values it implies, and the
// norm_topk_prob switch against the float64 reference.
#include <doctest/doctest.h>

#include <cmath>

#include "moetrain/model.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

namespace {

// Zeroes every router so all experts get probability 1/E (exact ties).
void zero_routers(Model& m) {
    for (const auto& p : m.params())
        if (p.name.find("moe.router") != std::string::npos)
            m.set_param(p.name, std::vector<float>(static_cast<size_t>(p.numel()), 0.0f));
}

}  // namespace

TEST_CASE("model: mix32 / hash routing values match hand-computed constants") {
    // python: z ^= z>>16; z *= 0x85EBCA6B; z ^= z>>13; z *= 0xC2B2AE35; z ^= z>>16 (mod 2^32)
    CHECK(rm::mix32(0u) == 0u);
    CHECK(rm::mix32(1u) == 0x514e28b7u);
    CHECK(rm::mix32(0xdeadbeefu) == 0x0de5c6a9u);
    CHECK(rm::mix32(0x9e3779b9u) == 0x92ca2f0eu);  // token 0, layer 0
    CHECK(rm::hash_expert(0, 0, 4) == 2);
    CHECK(rm::hash_expert(1, 0, 4) == 3);
    CHECK(rm::hash_expert(65, 1, 4) == 0);   // mix32(0x3c6ef3b3) = 0x811dcd7c
    CHECK(rm::hash_expert(255, 3, 7) == 5);  // mix32(0x78dde7e3) = 0xff5e7153
    CHECK(rm::hash_expert(31, 0, 7) == 3);   // mix32(0x9e3779d8) = 0xa3efcc72
}

TEST_CASE("model: hash routing sends every token to its mix32 expert in every layer") {
    ModelConfig c = rm::with_moe(rm::small_config(), 7, 1, 0);
    c.moe->router = RouterKind::hash;
    c.n_layers = 3;
    test::for_each_test_device([&](Device& dev) {
        Model m(dev, c);
        m.init_weights(1);
        const rm::Batch b = rm::random_batch(c.vocab_size, 3, 10, 4);
        const LossStats s = m.forward_loss(b.x.data(), b.y.data(), 3, 10);
        CHECK(s.aux == 0.0);
        CHECK(s.z == 0.0);
        REQUIRE(m.expert_load().size() == 3);
        for (const ExpertLoad& el : m.expert_load()) {
            std::vector<int32_t> want(7, 0);
            for (int32_t t : b.x) want[static_cast<size_t>(rm::hash_expert(t, el.layer, 7))]++;
            CAPTURE(el.layer);
            CHECK(el.counts == want);
        }
    });
}

TEST_CASE(
    "model: a uniform router picks the lowest expert ids; aux = alpha, z = z_alpha log(E)^2") {
    for (bool norm_topk : {true, false}) {
        ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 1);
        c.moe->norm_topk_prob = norm_topk;
        c.moe->aux_loss_alpha = 0.03;
        c.moe->z_loss_alpha = 0.002;
        test::for_each_test_device([&](Device& dev) {
            CAPTURE(norm_topk);
            Model m(dev, c);
            rm::randomize_weights(m, 2);
            zero_routers(m);
            const int B = 2, T = 6, N = B * T;
            const rm::Batch b = rm::random_batch(c.vocab_size, B, T, 8);
            const LossStats s = m.forward_loss(b.x.data(), b.y.data(), B, T);
            REQUIRE(m.expert_load().size() == 1);
            CHECK(m.expert_load()[0].layer == 1);
            CHECK(m.expert_load()[0].counts == std::vector<int32_t>{N, N, 0, 0});
            // f = (1/2, 1/2, 0, 0), P_e = 1/4: aux = alpha * 4 * (1/2 * 1/4 * 2) = alpha.
            CHECK(s.aux == doctest::Approx(0.03).epsilon(1e-6));
            CHECK(s.z == doctest::Approx(0.002 * std::log(4.0) * std::log(4.0)).epsilon(1e-5));
            // The weights (1/2 each with norm_topk, else 1/4) as the reference computes them.
            const rm::Loss ref = rm::loss(
                c, rm::weights_from(m.params(), m.get_flat(m.params_flat())), b.x, b.y, B, T);
            CHECK(s.ce == doctest::Approx(ref.ce).epsilon(1e-5));
        });
    }
}

TEST_CASE("model: norm_topk_prob changes the MoE output") {
    ModelConfig on = rm::with_moe(rm::small_config(), 4, 2, 0), off = on;
    off.moe->norm_topk_prob = false;
    test::for_each_test_device([&](Device& dev) {
        Model a(dev, on), b(dev, off);
        rm::randomize_weights(a, 5);
        rm::randomize_weights(b, 5);
        const rm::Batch bt = rm::random_batch(on.vocab_size, 2, 8, 3);
        const double la = a.forward_loss(bt.x.data(), bt.y.data(), 2, 8).ce;
        const double lb = b.forward_loss(bt.x.data(), bt.y.data(), 2, 8).ce;
        CHECK(std::abs(la - lb) > 1e-4);
        const auto ref_b = rm::loss(off, rm::weights_from(b.params(), b.get_flat(b.params_flat())),
                                    bt.x, bt.y, 2, 8);
        CHECK(lb == doctest::Approx(ref_b.ce).epsilon(1e-5));
    });
}
