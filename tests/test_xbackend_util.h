// Helpers for the cross-backend consistency tests (tests/test_xbackend_*.cpp): the backend
// pairs to compare (the first available device, normally cpu:0, is the reference; every
// other available device is checked against it), the model configs they share (dense, MoE
// softmax top-k, MoE hash), a learnable synthetic token stream, training runs through the
// public Trainer, and the comparison norms the tests state:
//   tensor_rel(a, b) = max_i |a_i - b_i| / max_i |b_i|   (b = the reference backend)
//   curve step s:      |loss_a(s) - loss_b(s)| / |loss_b(s)|
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/model.h"
#include "moetrain/train.h"
#include "op_test_util.h"

namespace moetrain::xbackend {

// One comparison: `other` must reproduce `ref` (the reference backend's device).
struct DevicePair {
    test::DeviceUnderTest ref, other;
    std::string label() const { return other.id + " vs " + ref.id; }
};

// Every available device paired with the reference (the first available device). With one
// device there is nothing to compare: the test prints why (MESSAGE) and passes.
inline std::vector<DevicePair> device_pairs(const std::string& what) {
    const auto devices = test::test_devices();
    std::vector<DevicePair> pairs;
    for (size_t i = 1; i < devices.size(); ++i) pairs.push_back({devices[0], devices[i]});
    if (pairs.empty()) {
        std::string why;
        for (const auto& b : list_backends()) {
            if (b.loaded && b.reason.empty() && !b.devices.empty()) continue;
            why += (why.empty() ? "" : "; ") + b.name + ": " +
                   (b.reason.empty() ? std::string("no usable device") : b.reason);
        }
        if (std::getenv("MOETRAIN_TEST_DEVICES"))
            why += (why.empty() ? "" : "; ") + std::string("MOETRAIN_TEST_DEVICES=") +
                   std::getenv("MOETRAIN_TEST_DEVICES");
        MESSAGE("xbackend: " << what << " skipped: only "
                             << (devices.empty() ? std::string("no device") : devices[0].id)
                             << " is available (" << why << ")");
    }
    return pairs;
}

// The same config instantiated on both devices of a pair.
struct ModelPair {
    Model ref, other;
    ModelPair(const DevicePair& pr, const ModelConfig& c)
        : ref(*pr.ref.dev, c), other(*pr.other.dev, c) {}
};

// ---- configs ------------------------------------------------------------------------------

struct NamedConfig {
    std::string name;
    ModelConfig cfg;
};

// V 64, D 32, 2 layers, 4 heads of 8, F 48, max_seq_len 32: rmsnorm, rope, swiglu, untied.
inline ModelConfig base_config() {
    return sized_config(64, 32, 2, 4, 4, 48, 32);
}

inline MoeConfig moe_block(int experts, int top_k, RouterKind router) {
    MoeConfig m;
    m.n_experts = experts;
    m.top_k = top_k;
    m.router = router;
    return m;
}

inline NamedConfig config_dense() {
    return {"dense MHA swiglu", base_config()};
}

inline NamedConfig config_moe_softmax() {
    ModelConfig c = base_config();
    c.n_kv_heads = 2;
    c.moe = moe_block(4, 2, RouterKind::softmax_topk);
    c.moe->n_shared_experts = 1;
    c.moe->aux_loss_alpha = 0.05;
    c.moe->z_loss_alpha = 0.01;
    return {"MoE softmax top2 + 1 shared, aux + z", c};
}

inline NamedConfig config_moe_hash() {
    ModelConfig c = base_config();
    c.n_kv_heads = 1;
    c.ffn = FfnKind::relu;
    c.moe = moe_block(4, 1, RouterKind::hash);
    c.moe->first_layer = 1;
    return {"MoE hash (layer 1) MQA relu", c};
}

inline NamedConfig config_gqa() {
    ModelConfig c = base_config();
    c.n_heads = 8;
    c.head_dim = 4;
    c.n_kv_heads = 2;
    c.ffn = FfnKind::gelu;
    return {"GQA 8 heads / 2 kv gelu", c};
}

inline NamedConfig config_layernorm_learned_tied() {
    ModelConfig c = base_config();
    c.norm = NormKind::layernorm;
    c.bias = true;
    c.pos = PosKind::learned;
    c.tie_embeddings = true;
    c.ffn = FfnKind::gelu;
    return {"layernorm + bias + learned pos + tied", c};
}

// ---- data ---------------------------------------------------------------------------------

// A learnable stream: next = (5 prev + 3) mod V, with a random token in 1 of 8 positions.
inline std::vector<int32_t> token_stream(int vocab, size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> s(n);
    s[0] = 1;
    for (size_t i = 1; i < n; ++i)
        s[i] = rng() % 8 == 0 ? static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab))
                              : (5 * s[i - 1] + 3) % vocab;
    return s;
}

struct Batch {
    std::vector<int32_t> x, y;
};

// Batch number `index`: B consecutive windows of T tokens (targets shifted by one).
inline Batch batch_at(const std::vector<int32_t>& stream, int index, int B, int T) {
    const size_t n = static_cast<size_t>(B) * T;
    const size_t start = (static_cast<size_t>(index) * n) % (stream.size() - n - 1);
    Batch b;
    b.x.assign(stream.begin() + static_cast<long>(start),
               stream.begin() + static_cast<long>(start + n));
    b.y.assign(stream.begin() + static_cast<long>(start + 1),
               stream.begin() + static_cast<long>(start + n + 1));
    return b;
}

// ---- training -----------------------------------------------------------------------------

constexpr int kTrainB = 2, kTrainT = 16;

inline TrainOptions curve_options(int64_t total_steps) {
    TrainOptions o;
    o.lr = 1e-2;
    o.warmup = 2;
    o.total_steps = total_steps;
    o.clip = 1.0;
    return o;
}

// What one optimizer step reported, plus the expert loads of its last forward.
struct StepRecord {
    double loss = 0, ce = 0, aux = 0, z = 0, grad_norm = 0;
    std::vector<ExpertLoad> loads;
};

// Steps [first, first + count) of the curve on `stream`.
inline std::vector<StepRecord> train_steps(Trainer& tr, const std::vector<int32_t>& stream,
                                           int first, int count) {
    std::vector<StepRecord> out;
    for (int s = first; s < first + count; ++s) {
        const Batch b = batch_at(stream, s, kTrainB, kTrainT);
        const StepStats st = tr.step(b.x.data(), b.y.data(), kTrainB, kTrainT);
        out.push_back({st.loss.loss, st.loss.ce, st.loss.aux, st.loss.z, st.grad_norm,
                       tr.model().expert_load()});
    }
    return out;
}

// ---- comparison norms ---------------------------------------------------------------------

// max |a - b| / max |b| (b is the reference); 0 when both are all zero, inf when only b is.
inline double tensor_rel(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(double{a[i]} - double{b[i]}));
        scale = std::max(scale, std::abs(double{b[i]}));
        if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    }
    if (diff == 0) return 0;
    return scale == 0 ? INFINITY : diff / scale;
}

inline double rel_diff(double a, double b) {
    if (a == b) return 0;
    return std::abs(a - b) / std::max(std::abs(b), 1e-30);
}

// Largest step-wise relative loss difference of two curves of equal length; CHECKs that
// every step stays within `tol` and that the expert loads (routing) agree at every step.
inline double check_curves(const std::vector<StepRecord>& got, const std::vector<StepRecord>& want,
                           double tol, const std::string& what) {
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (size_t s = 0; s < got.size(); ++s) {
        CAPTURE(what);
        CAPTURE(s);
        CAPTURE(got[s].loss);
        CAPTURE(want[s].loss);
        const double r = rel_diff(got[s].loss, want[s].loss);
        worst = std::max(worst, r);
        CHECK(r <= tol);
        REQUIRE(got[s].loads.size() == want[s].loads.size());
        for (size_t l = 0; l < got[s].loads.size(); ++l) {
            CAPTURE(got[s].loads[l].layer);
            CHECK(got[s].loads[l].counts == want[s].loads[l].counts);
        }
    }
    return worst;
}

}  // namespace moetrain::xbackend
