// Whole-model consistency across backends: for each config (dense, MoE softmax top-k
// with a shared expert and aux + z losses, hash routing, GQA, layernorm + bias + learned
// positions + tied embeddings) every other available backend reproduces the reference
// backend (cpu) through the public Model / Trainer API:
//   - identical initial weights (bit for bit: the init is drawn on the host);
//   - forward logits and every parameter gradient: max|a-b| / max|b| <= 1e-4 per tensor
//     (b = reference; the key biases, whose exact gradient is 0, must both be rounding noise
//     below 1e-6 of the largest gradient component);
//   - loss terms ce, aux, z, loss: |a-b| / |b| <= 1e-5;
//   - identical routing (expert loads) in the forward pass;
//   - 20 AdamW steps (lr 1e-2, warmup 2, cosine, clip 1) on the same batches: the loss of
//     every step within rel 1e-4 of the reference, and identical expert loads at every step.
#include <doctest/doctest.h>

#include <sstream>

#include "reference_model.h"
#include "test_xbackend_util.h"

using namespace moetrain;
using namespace moetrain::xbackend;

namespace {

constexpr double kTensorTol = 1e-4;  // logits and gradients, max|a-b| / max|b| per tensor
constexpr double kLossTol = 1e-5;    // loss terms, |a-b| / |b|
constexpr double kCurveTol = 1e-4;   // loss of each training step, |a-b| / |b|
constexpr int kCurveSteps = 20;

// Batch for the forward / gradient comparison: every 7th target ignored (-1).
Batch probe_batch(int vocab) {
    const auto stream = token_stream(vocab, 512, 99);
    Batch b = batch_at(stream, 3, kTrainB, kTrainT);
    for (size_t i = 6; i < b.y.size(); i += 7) b.y[i] = -1;
    return b;
}

double max_abs(const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, double{std::abs(x)});
    return m;
}

// The key bias adds q . bk to every score of a query row, which the softmax over keys
// ignores: its exact gradient is 0 and both backends return rounding noise (~1e-8 of the
// largest gradient). It is checked against that: max|a|, max|b| <= kNoiseFloor * the model's
// largest gradient component, instead of relatively.
bool gradient_is_exactly_zero(const std::string& name) {
    const std::string suffix = ".attn.wk.bias";
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}
constexpr double kNoiseFloor = 1e-6;

struct Worst {
    double rel = 0;
    std::string tensor;
};

// CHECKs every tensor's gradient against kTensorTol; returns the largest difference.
Worst check_gradients(const Model& got, const Model& want) {
    const std::vector<float> ga = got.get_flat(got.grads_flat());
    const std::vector<float> gb = want.get_flat(want.grads_flat());
    const double largest = max_abs(gb);
    REQUIRE(largest > 0);
    Worst worst;
    for (const ParamInfo& p : want.params()) {
        const auto first = static_cast<long>(p.offset), last = first + static_cast<long>(p.numel());
        const std::vector<float> a(ga.begin() + first, ga.begin() + last);
        const std::vector<float> b(gb.begin() + first, gb.begin() + last);
        CAPTURE(p.name);
        if (gradient_is_exactly_zero(p.name)) {
            CHECK(max_abs(a) <= kNoiseFloor * largest);
            CHECK(max_abs(b) <= kNoiseFloor * largest);
            continue;
        }
        const double r = tensor_rel(a, b);
        CAPTURE(r);
        CHECK(r <= kTensorTol);
        if (r >= worst.rel) worst = {r, p.name};
    }
    return worst;
}

void check_forward_and_gradients(const NamedConfig& nc, const DevicePair& pr) {
    const ModelConfig& c = nc.cfg;
    ModelPair mp(pr, c);
    Model &ref = mp.ref, &other = mp.other;
    refmodel::randomize_weights(ref, 7);
    refmodel::randomize_weights(other, 7);
    REQUIRE(ref.get_flat(ref.params_flat()) == other.get_flat(other.params_flat()));

    const Batch b = probe_batch(c.vocab_size);
    const double logits_rel = tensor_rel(other.forward_logits(b.x.data(), kTrainB, kTrainT),
                                         ref.forward_logits(b.x.data(), kTrainB, kTrainT));
    CHECK(logits_rel <= kTensorTol);

    const LossStats la = other.forward_loss(b.x.data(), b.y.data(), kTrainB, kTrainT);
    const LossStats lb = ref.forward_loss(b.x.data(), b.y.data(), kTrainB, kTrainT);
    const double loss_rel = std::max({rel_diff(la.ce, lb.ce), rel_diff(la.aux, lb.aux),
                                      rel_diff(la.z, lb.z), rel_diff(la.loss, lb.loss)});
    CAPTURE(la.loss);
    CAPTURE(lb.loss);
    CHECK(loss_rel <= kLossTol);
    CHECK(la.tokens == lb.tokens);
    if (c.moe && c.moe->router == RouterKind::softmax_topk) {
        CHECK(lb.aux > 0);
        CHECK(lb.z > 0);
    }

    ref.zero_grads();
    other.zero_grads();
    other.forward_backward(b.x.data(), b.y.data(), kTrainB, kTrainT);
    ref.forward_backward(b.x.data(), b.y.data(), kTrainB, kTrainT);
    REQUIRE(other.expert_load().size() == ref.expert_load().size());
    for (size_t l = 0; l < ref.expert_load().size(); ++l)
        CHECK(other.expert_load()[l].counts == ref.expert_load()[l].counts);
    const Worst grad = check_gradients(other, ref);
    MESSAGE("xbackend " << pr.label() << " [" << nc.name << "]: logits rel " << logits_rel
                        << ", loss rel " << loss_rel << ", worst gradient tensor rel " << grad.rel
                        << " (" << grad.tensor << ")");
}

void check_training_curve(const NamedConfig& nc, const DevicePair& pr) {
    const auto stream = token_stream(nc.cfg.vocab_size, 4096, 5);
    ModelPair mp(pr, nc.cfg);
    Model &ref = mp.ref, &other = mp.other;
    ref.init_weights(11);
    other.init_weights(11);
    Trainer tr_ref(ref, curve_options(kCurveSteps)), tr_other(other, curve_options(kCurveSteps));
    const auto want = train_steps(tr_ref, stream, 0, kCurveSteps);
    const auto got = train_steps(tr_other, stream, 0, kCurveSteps);
    // The curve must actually move, or matching it would prove little.
    CHECK(want.back().loss < 0.8 * want.front().loss);
    const double worst = check_curves(got, want, kCurveTol, nc.name);
    MESSAGE("xbackend " << pr.label() << " [" << nc.name << "]: " << kCurveSteps
                        << " AdamW steps, loss " << want.front().loss << " -> " << want.back().loss
                        << ", worst step rel " << worst);
}

void check_config(const NamedConfig& nc) {
    for_each_pair(nc, "model " + nc.name, [&](const DevicePair& pr) {
        check_forward_and_gradients(nc, pr);
        check_training_curve(nc, pr);
    });
}

}  // namespace

TEST_CASE("xbackend: dense model: logits, loss, gradients and 20 AdamW steps match cpu") {
    check_config(config_dense());
}

TEST_CASE(
    "xbackend: MoE softmax top-k + shared expert + aux/z: logits, loss, gradients, 20 steps") {
    check_config(config_moe_softmax());
}

TEST_CASE("xbackend: MoE hash routing: logits, loss, gradients and 20 AdamW steps match cpu") {
    check_config(config_moe_hash());
}

TEST_CASE("xbackend: GQA: logits, loss, gradients and 20 AdamW steps match cpu") {
    check_config(config_gqa());
}

TEST_CASE("xbackend: layernorm + bias + learned pos + tied: logits, loss, gradients, 20 steps") {
    check_config(config_layernorm_learned_tied());
}
