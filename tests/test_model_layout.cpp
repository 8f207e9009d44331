// Parameter layout (MODEL.md 6 names and shapes, decayed tensors first, contiguous offsets),
// seeded init (statistics, reproducibility, keyed by name), model_cost and input errors.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "moetrain/model.h"
#include "op_test_util.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

namespace {

ModelConfig full_featured() {
    ModelConfig c = rm::with_moe(rm::small_config(), 4, 2, 1);
    c.norm = NormKind::layernorm;
    c.bias = true;
    c.pos = PosKind::learned;
    c.moe->n_shared_experts = 2;
    return c;
}

double stddev(const std::vector<float>& v) {
    double s = 0, ss = 0;
    for (float x : v) s += x, ss += double{x} * x;
    const double n = static_cast<double>(v.size()), mean = s / n;
    return std::sqrt(ss / n - mean * mean);
}

}  // namespace

TEST_CASE("model: parameter names and shapes follow MODEL.md section 6") {
    auto dev = open_device("cpu");
    const ModelConfig c = full_featured();  // D 16, H 4 x 4, K 2, F 24, E 4, S 2, V 32
    Model m(*dev, c);
    std::map<std::string, std::string> got;
    for (const auto& p : m.params()) got[p.name] = p.shape.str();
    const std::map<std::string, std::string> want = {
        {"tok_emb.weight", "[32,16]"},
        {"pos_emb.weight", "[16,16]"},
        {"norm_f.weight", "[16]"},
        {"norm_f.bias", "[16]"},
        {"lm_head.weight", "[32,16]"},
        {"layers.0.attn_norm.weight", "[16]"},
        {"layers.0.attn_norm.bias", "[16]"},
        {"layers.0.attn.wq.weight", "[16,16]"},
        {"layers.0.attn.wq.bias", "[16]"},
        {"layers.0.attn.wk.weight", "[8,16]"},
        {"layers.0.attn.wk.bias", "[8]"},
        {"layers.0.attn.wv.weight", "[8,16]"},
        {"layers.0.attn.wv.bias", "[8]"},
        {"layers.0.attn.wo.weight", "[16,16]"},
        {"layers.0.attn.wo.bias", "[16]"},
        {"layers.0.ffn_norm.weight", "[16]"},
        {"layers.0.ffn_norm.bias", "[16]"},
        {"layers.0.ffn.w_gate.weight", "[24,16]"},
        {"layers.0.ffn.w_gate.bias", "[24]"},
        {"layers.0.ffn.w_up.weight", "[24,16]"},
        {"layers.0.ffn.w_up.bias", "[24]"},
        {"layers.0.ffn.w_down.weight", "[16,24]"},
        {"layers.0.ffn.w_down.bias", "[16]"},
        {"layers.1.attn_norm.weight", "[16]"},
        {"layers.1.attn_norm.bias", "[16]"},
        {"layers.1.attn.wq.weight", "[16,16]"},
        {"layers.1.attn.wq.bias", "[16]"},
        {"layers.1.attn.wk.weight", "[8,16]"},
        {"layers.1.attn.wk.bias", "[8]"},
        {"layers.1.attn.wv.weight", "[8,16]"},
        {"layers.1.attn.wv.bias", "[8]"},
        {"layers.1.attn.wo.weight", "[16,16]"},
        {"layers.1.attn.wo.bias", "[16]"},
        {"layers.1.ffn_norm.weight", "[16]"},
        {"layers.1.ffn_norm.bias", "[16]"},
        {"layers.1.moe.router.weight", "[4,16]"},
        {"layers.1.moe.experts.w_gate", "[4,24,16]"},
        {"layers.1.moe.experts.w_up", "[4,24,16]"},
        {"layers.1.moe.experts.w_down", "[4,16,24]"},
        {"layers.1.moe.shared.w_gate.weight", "[48,16]"},
        {"layers.1.moe.shared.w_up.weight", "[48,16]"},
        {"layers.1.moe.shared.w_down.weight", "[16,48]"},
    };
    CHECK(got == want);
    // Decayed (rank >= 2) first, contiguous, covering the flat buffer.
    int64_t off = 0;
    bool seen_rest = false;
    for (const auto& p : m.params()) {
        CAPTURE(p.name);
        CHECK(p.offset == off);
        CHECK(p.decay == (p.shape.rank >= 2));
        if (!p.decay) seen_rest = true;
        CHECK(!(seen_rest && p.decay));
        off += p.numel();
    }
    CHECK(off == m.num_params());
    CHECK(m.params_flat().numel() == m.num_params());
    CHECK(m.grads_flat().numel() == m.num_params());

    ModelConfig tied = rm::small_config();
    tied.tie_embeddings = true;
    Model mt(*dev, tied);
    CHECK_THROWS_WITH_AS(mt.param("lm_head.weight"), doctest::Contains("lm_head.weight"), Error);
}

TEST_CASE("model: seeded init has the documented statistics and is keyed by name") {
    auto dev = open_device("cpu");
    ModelConfig c = sized_config(256, 64, 2, 4, 2, 128, 16);  // small_config, wider
    Model m(*dev, c);
    m.init_weights(7);
    CHECK(stddev(m.get_param("tok_emb.weight")) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(stddev(m.get_param("layers.1.ffn.w_up.weight")) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(stddev(m.get_param("layers.0.attn.wo.weight")) == doctest::Approx(0.01).epsilon(0.05));
    CHECK(stddev(m.get_param("layers.1.ffn.w_down.weight")) == doctest::Approx(0.01).epsilon(0.05));
    for (float g : m.get_param("norm_f.weight")) CHECK(g == 1.0f);
    const std::vector<float> wq = m.get_param("layers.0.attn.wq.weight");
    m.init_weights(7);
    CHECK(m.get_param("layers.0.attn.wq.weight") == wq);
    m.init_weights(8);
    CHECK(m.get_param("layers.0.attn.wq.weight") != wq);

    // Same name, same values, whatever else the config contains (biases, learned positions).
    ModelConfig other = c;
    other.bias = true;
    other.norm = NormKind::layernorm;
    other.pos = PosKind::learned;
    Model m2(*dev, other);
    m2.init_weights(7);
    CHECK(m2.get_param("layers.0.attn.wq.weight") == wq);
    for (float b : m2.get_param("layers.0.attn.wq.bias")) CHECK(b == 0.0f);
}

TEST_CASE("model: model_cost of the tiny preset, counted by hand") {
    // tiny: V 256, D 64, L 2, H 4 x 16, K 2, F 128, swiglu, untied; layer 1 MoE E 4 top-2, 1
    // shared.
    const ModelConfig c = preset_config("tiny");
    const ModelCost mc = model_cost(c);
    const int64_t attn = 64 * 64 + 2 * (32 * 64) + 64 * 64;  // wq, wk, wv, wo
    const int64_t ffn = 3 * 64 * 128;
    CHECK(mc.total_params == 2 * 256 * 64 + 64 + 2 * (attn + 128) + ffn + 4 * 64 + 4 * ffn + ffn);
    CHECK(mc.active_matmul_params == 256 * 64 + 2 * attn + ffn + 4 * 64 + 2 * ffn + ffn);
    CHECK(mc.train_flops_per_token(128) ==
          doctest::Approx(6.0 * mc.active_matmul_params + 12.0 * 2 * 128 * 64));
    auto dev = open_device("cpu");
    Model m(*dev, c);
    CHECK(m.num_params() == mc.total_params);
}

TEST_CASE("model: bad inputs are rejected with a message naming them") {
    auto dev = open_device("cpu");
    const ModelConfig c = rm::small_config();  // V 32, max_seq_len 16
    Model m(*dev, c);
    m.init_weights(1);
    std::vector<int32_t> x = {1, 2, 3, 40}, y = {1, 2, 3, 4};
    CHECK_THROWS_WITH_AS(m.forward_loss(x.data(), y.data(), 1, 4),
                         doctest::Contains("token id 40 at position 3"), Error);
    x[3] = -2;
    CHECK_THROWS_WITH_AS(m.forward_backward(x.data(), y.data(), 2, 2),
                         doctest::Contains("token id -2 at position 3 (row 1, t 1)"), Error);
    x[3] = 4;
    y[0] = 32;
    CHECK_THROWS_WITH_AS(m.forward_loss(x.data(), y.data(), 1, 4),
                         doctest::Contains("target id 32 at position 0"), Error);
    std::vector<int32_t> long_x(17, 1);
    CHECK_THROWS_WITH_AS(m.forward_logits(long_x.data(), 1, 17),
                         doctest::Contains("exceeds max_seq_len 16"), Error);
    CHECK_THROWS_WITH_AS(m.get_param("nope"), doctest::Contains("nope"), Error);
    CHECK_THROWS_WITH_AS(m.set_param("norm_f.weight", {1.0f}), doctest::Contains("norm_f.weight"),
                         Error);
}
