// Gradient checkpointing (Model::set_recompute): with Recompute block and ffn the
// backward re-runs dropped parts of the forward, so losses, every gradient, the routing record
// and the expert loads must be BIT-identical to Recompute none on the same device (the same
// deterministic ops on the same inputs), the aux / z loss terms must not be counted twice
// (micro-batch accumulation and Trainer steps), and the training workspace must shrink by
// exactly the activations the mode drops.
#include <doctest/doctest.h>

#include <memory>

#include "model_bits_util.h"

using namespace moetrain;
namespace xb = moetrain::xbackend;

namespace {

constexpr int kB = 2, kT = 16;
constexpr uint64_t kSeed = 11;
const Recompute kModes[] = {Recompute::block, Recompute::ffn};

// The cross-backend test configs (test_xbackend_util.h) with three layers, so the middle layer is
// recomputed too (the last one never is: the shared buffers still hold its forward). The hash
// config mixes a dense layer 0 with MoE layers 1-2 (the shared set then holds both kinds of FFN
// buffers).
std::vector<xb::NamedConfig> configs() {
    std::vector<xb::NamedConfig> v = {xb::config_dense(), xb::config_gqa(),
                                      xb::config_moe_softmax(), xb::config_moe_hash(),
                                      xb::config_layernorm_learned_tied()};
    for (auto& c : v) c.cfg.n_layers = 3;
    return v;
}

void check_loss(const LossStats& got, const LossStats& want) {
    CHECK(got.ce == want.ce);
    CHECK(got.aux == want.aux);
    CHECK(got.z == want.z);
    CHECK(got.loss == want.loss);
    CHECK(got.tokens == want.tokens);
}

void check_loads(const std::vector<ExpertLoad>& got, const std::vector<ExpertLoad>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t l = 0; l < got.size(); ++l) {
        CHECK(got[l].layer == want[l].layer);
        CHECK(got[l].counts == want[l].counts);
    }
}

// A model with the seeded initial weights, training in `mode` and `precision`.
std::unique_ptr<Model> model_in(Device& dev, const ModelConfig& c, Recompute mode,
                                Precision precision = Precision::fp32) {
    auto m = std::make_unique<Model>(dev, c);
    m->init_weights(kSeed);
    m->set_precision(precision);
    m->set_recompute(mode);
    REQUIRE(m->recompute() == mode);
    return m;
}

using bits::FbRun;

FbRun forward_backward_run(Device& dev, const ModelConfig& c, Recompute mode,
                           Precision precision = Precision::fp32) {
    const auto model = model_in(dev, c, mode, precision);
    return bits::accumulate_two(*model, 5, kB, kT);
}

// Two Trainer steps of two micro-batches each, then the parameters.
struct TrainRun {
    std::vector<StepStats> steps;
    std::vector<float> params;
    std::vector<ExpertLoad> loads;
};

TrainRun trainer_run(Device& dev, const ModelConfig& c, Recompute mode) {
    const auto model = model_in(dev, c, mode);
    Model& m = *model;
    constexpr int kSteps = 2;
    TrainOptions o = xb::curve_options(kSteps);
    o.accum = 2;
    Trainer tr(m, o);
    const std::vector<int32_t> stream = xb::token_stream(c.vocab_size, 4096, 9);
    TrainRun r;
    for (int s = 0; s < kSteps; ++s) {
        xb::Batch b0 = xb::batch_at(stream, 2 * s, kB, kT);
        const xb::Batch b1 = xb::batch_at(stream, 2 * s + 1, kB, kT);
        b0.x.insert(b0.x.end(), b1.x.begin(), b1.x.end());
        b0.y.insert(b0.y.end(), b1.y.begin(), b1.y.end());
        r.steps.push_back(tr.step(b0.x.data(), b0.y.data(), kB, kT));
    }
    r.params = m.get_flat(m.params_flat());
    r.loads = m.expert_load();
    return r;
}

// ---- the analytic size of what each mode keeps (floats and i32, 4 bytes each) -------------

int64_t norm_floats(const ModelConfig& c, int64_t N) {
    return N * c.d_model + N * (c.norm == NormKind::layernorm ? 2 : 1);  // y; (mean,) rstd
}

// x_mid, both norms, q, k, v, o, lse.
int64_t attention_part(const ModelConfig& c, int64_t N) {
    const int64_t q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
    return N * c.d_model + 2 * norm_floats(c, N) + N * (2 * q + 2 * kv) + N * c.n_heads;
}

int64_t ffn_floats(const ModelConfig& c, int64_t rows, int64_t F) {
    return rows * F * (c.ffn == FfnKind::swiglu ? 3 : 2);  // (gate,) up, h
}

int64_t dense_part(const ModelConfig& c, int64_t N) {
    return ffn_floats(c, N, c.d_ff);
}

// Router (softmax: logits, probs, lse, weights), chosen experts, counts, the sort's two
// index maps, gathered rows and expert outputs, the routed and the shared experts' hiddens.
int64_t moe_part(const ModelConfig& c, int64_t N) {
    const MoeConfig& m = *c.moe;
    const int64_t E = m.n_experts, k = m.active_k();
    int64_t n = m.router == RouterKind::softmax_topk ? N * (2 * E + 1 + k) : 0;
    n += N * k + E + 2 * N * k + 2 * N * k * c.d_model + ffn_floats(c, N * k, c.d_ff);
    return n + ffn_floats(c, N, int64_t{m.n_shared_experts} * c.d_ff);
}

int64_t layer_ffn_part(const ModelConfig& c, int l, int64_t N) {
    return c.is_moe_layer(l) ? moe_part(c, N) : dense_part(c, N);
}

// One shared FFN set: the dense and / or the MoE buffers the layers need.
int64_t shared_ffn_part(const ModelConfig& c, int64_t N) {
    bool dense = false, moe = false;
    for (int l = 0; l < c.n_layers; ++l) (c.is_moe_layer(l) ? moe : dense) = true;
    return (dense ? dense_part(c, N) : 0) + (moe ? moe_part(c, N) : 0);
}

}  // namespace

TEST_CASE("recompute: forward_backward losses, gradients, routing, loads bit-identical") {
    test::for_each_test_device([&](Device& dev) {
        for (const auto& nc : configs()) {
            CAPTURE(nc.name);
            const FbRun want = forward_backward_run(dev, nc.cfg, Recompute::none);
            if (nc.cfg.moe && nc.cfg.moe->router == RouterKind::softmax_topk) {
                CHECK(want.losses[0].aux > 0);  // the double counting check is not vacuous
                CHECK(want.losses[0].z > 0);
            }
            if (nc.cfg.moe) CHECK(want.routing.size() > 0);
            for (Recompute mode : kModes) {
                CAPTURE(to_string(mode));
                const FbRun got = forward_backward_run(dev, nc.cfg, mode);
                REQUIRE(got.losses.size() == want.losses.size());
                for (size_t i = 0; i < got.losses.size(); ++i)
                    check_loss(got.losses[i], want.losses[i]);
                bits::check_bits(got.grads, want.grads, "gradients");
                CHECK(got.routing == want.routing);  // recorded once per forward, not again
                check_loads(got.loads, want.loads);
            }
        }
    });
}

TEST_CASE("recompute: bf16 and fp16 matrix products, gradients bit-identical too") {
    // The recompute multiplies with the same 16-bit working copy of the weights.
    test::for_each_test_device([&](Device& dev) {
        for (const auto& nc : {xb::config_dense(), xb::config_moe_softmax()}) {
            for (Precision p : {Precision::bf16, Precision::fp16}) {
                CAPTURE(nc.name);
                CAPTURE(precision_name(p));
                ModelConfig c = nc.cfg;
                c.n_layers = 3;
                const FbRun want = forward_backward_run(dev, c, Recompute::none, p);
                for (Recompute mode : kModes) {
                    CAPTURE(to_string(mode));
                    const FbRun got = forward_backward_run(dev, c, mode, p);
                    for (size_t i = 0; i < got.losses.size(); ++i)
                        check_loss(got.losses[i], want.losses[i]);
                    bits::check_bits(got.grads, want.grads, "gradients");
                }
            }
        }
    });
}

TEST_CASE("recompute: Trainer steps with accumulation bit-identical (no double counted stats)") {
    test::for_each_test_device([&](Device& dev) {
        for (const auto& nc : configs()) {
            CAPTURE(nc.name);
            const TrainRun want = trainer_run(dev, nc.cfg, Recompute::none);
            for (Recompute mode : kModes) {
                CAPTURE(to_string(mode));
                const TrainRun got = trainer_run(dev, nc.cfg, mode);
                REQUIRE(got.steps.size() == want.steps.size());
                for (size_t s = 0; s < got.steps.size(); ++s) {
                    CAPTURE(s);
                    check_loss(got.steps[s].loss, want.steps[s].loss);
                    CHECK(got.steps[s].grad_norm == want.steps[s].grad_norm);
                }
                bits::check_bits(got.params, want.params, "parameters after the steps");
                check_loads(got.loads, want.loads);
            }
        }
    });
}

TEST_CASE("recompute: the training workspace shrinks by the dropped activations") {
    const auto devices = test::test_devices();
    const test::DeviceUnderTest& d = devices.front();
    for (const auto& nc : configs()) {
        CAPTURE(nc.name);
        const ModelConfig& c = nc.cfg;
        const int64_t N = int64_t{kB} * kT, L = c.n_layers;
        Model m(*d.dev, c);  // one model: set_recompute replans the training workspace
        const int64_t none = m.training_workspace_bytes(kB, kT);
        m.set_recompute(Recompute::block);
        const int64_t block = m.training_workspace_bytes(kB, kT);
        m.set_recompute(Recompute::ffn);
        const int64_t ffn = m.training_workspace_bytes(kB, kT);
        m.set_recompute(Recompute::none);
        CHECK(m.training_workspace_bytes(kB, kT) == none);

        int64_t layers_ffn = 0;
        for (int l = 0; l < L; ++l) layers_ffn += layer_ffn_part(c, l, N);
        // block keeps each layer's input only: L attention parts and L FFN parts become one
        // shared layer; ffn keeps the attention parts: L FFN parts become one shared set.
        const int64_t drop_ffn = layers_ffn - shared_ffn_part(c, N);
        const int64_t drop_block = (L - 1) * attention_part(c, N) + drop_ffn;
        CAPTURE(none);
        CHECK(none - ffn == 4 * drop_ffn);
        CHECK(none - block == 4 * drop_block);
        CHECK(block < ffn);
        CHECK(ffn < none);
        MESSAGE(nc.name << ": training workspace none " << none << " B, ffn " << ffn << " B, block "
                        << block << " B");
    }
}

TEST_CASE("recompute: mode names parse and print; unknown names throw") {
    for (Recompute r : {Recompute::none, Recompute::block, Recompute::ffn})
        CHECK(parse_recompute(to_string(r)) == r);
    CHECK(to_string(Recompute::block) == "block");
    CHECK_THROWS_WITH_AS(parse_recompute("layer"), doctest::Contains("recompute mode 'layer'"),
                         Error);
}
