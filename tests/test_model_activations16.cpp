// 16-bit activation storage of mixed precision (workspace.h): under bf16 / fp16 the
// activations only matrix products read (norm outputs, expert input rows, FFN hiddens) are
// stored in the compute dtype. The products round their operands to that dtype anyway, so
// losses, gradients, logits and routing must be BIT-identical to storing them in f32
// (WorkspaceCache::set_activations16(false)), on every test device, for every recompute mode; the
// training workspace must shrink by exactly 2 bytes per 16-bit element; fp32 must not change.
#include <doctest/doctest.h>

#include "model_bits_util.h"

using namespace moetrain;
namespace xb = moetrain::xbackend;

namespace {

constexpr int kB = 2, kT = 16;
const Recompute kModes[] = {Recompute::none, Recompute::block, Recompute::ffn};
const Precision k16[] = {Precision::bf16, Precision::fp16};

// Three layers (the middle one is recomputed too): dense swiglu, dense gelu with layernorm,
// biases and a tied head, MoE softmax top-2 with a shared expert (its FFN norm output stays
// f32: the router reads it), and hash routing after a dense layer with a shared expert (its
// FFN norm output is 16-bit and widened again for the gather).
std::vector<xb::NamedConfig> configs() {
    xb::NamedConfig hash = xb::config_moe_hash();
    hash.cfg.moe->n_shared_experts = 1;
    hash.name += " + 1 shared";
    std::vector<xb::NamedConfig> v = {xb::config_dense(), xb::config_layernorm_learned_tied(),
                                      xb::config_moe_softmax(), hash};
    for (auto& c : v) c.cfg.n_layers = 3;
    return v;
}

struct Run {
    std::vector<ParamInfo> layout;
    bits::FbRun fb;
    std::vector<float> logits;
    int64_t workspace_bytes = 0;
};

// Two accumulated micro-batches, then the logits of the first batch (the training workspace
// of that shape serves the inference pass too).
Run run(Device& dev, const ModelConfig& c, Precision p, Recompute mode, bool store16) {
    Model m(dev, c);
    m.init_weights(5);
    m.set_precision(p);
    m.set_recompute(mode);
    ModelAccess::impl(m).workspaces.set_activations16(store16);
    REQUIRE(ModelAccess::impl(m).workspaces.activations16() == store16);
    Run r;
    r.layout = m.params();
    r.fb = bits::accumulate_two(m, 8, kB, kT);
    const xb::Batch b = xb::batch_at(xb::token_stream(c.vocab_size, 4096, 8), 0, kB, kT);
    r.logits = m.forward_logits(b.x.data(), kB, kT);
    r.workspace_bytes = m.training_workspace_bytes(kB, kT);
    return r;
}

// ---- what the planner stores in 16 bits, counted independently ----------------------------

bool n2_gemm_only(const ModelConfig& c, int l) {
    return !(c.is_moe_layer(l) && c.moe->router == RouterKind::softmax_topk);
}

// A layer's FFN part: the dense hidden, or the expert rows and hiddens and the shared hidden.
int64_t ffn_part16(const ModelConfig& c, bool moe, int64_t N) {
    if (!moe) return N * c.d_ff;
    const int64_t k = c.moe->active_k();
    return N * k * c.d_model + N * k * c.d_ff + N * c.moe->n_shared_experts * c.d_ff;
}

// Elements the training workspace of mode `r` stores in 16 bits.
int64_t elements16(const ModelConfig& c, Recompute r, int64_t N) {
    const int64_t D = c.d_model;
    bool dense = false, moe = false, all_n2 = true;
    for (int l = 0; l < c.n_layers; ++l) {
        (c.is_moe_layer(l) ? moe : dense) = true;
        all_n2 = all_n2 && n2_gemm_only(c, l);
    }
    const int64_t shared_ffn =
        (dense ? ffn_part16(c, false, N) : 0) + (moe ? ffn_part16(c, true, N) : 0);
    if (r == Recompute::block) return N * D * (all_n2 ? 2 : 1) + shared_ffn;
    int64_t n = 0;
    for (int l = 0; l < c.n_layers; ++l) {
        n += N * D * (n2_gemm_only(c, l) ? 2 : 1);
        if (r == Recompute::none) n += ffn_part16(c, c.is_moe_layer(l), N);
    }
    return r == Recompute::ffn ? n + shared_ffn : n;
}

// Every tensor of the workspace, for the dtype checks.
std::vector<const Tensor*> tensors_of(const Workspace& ws) {
    std::vector<const Tensor*> v = {&ws.x_final, &ws.nf.y, &ws.logits, &ws.g.dh, &ws.g.dxg};
    auto ffn = [&](const FfnActs& f) { v.insert(v.end(), {&f.gate, &f.up, &f.h}); };
    for (const LayerActs& a : ws.layers) {
        v.insert(v.end(), {&a.x_in, &a.x_mid, &a.n1.y, &a.n2.y, &a.n2.y32, &a.attn.q, &a.attn.o,
                           &a.moe.xg, &a.moe.yrows});
        ffn(a.ffn);
        ffn(a.moe.experts);
        ffn(a.moe.shared);
    }
    return v;
}

}  // namespace

TEST_CASE("act16: bf16 / fp16 activation storage is bit-identical to f32 storage") {
    test::for_each_test_device([&](Device& dev) {
        for (const auto& nc : configs()) {
            for (Precision p : k16) {
                for (Recompute mode : kModes) {
                    CAPTURE(nc.name);
                    CAPTURE(std::string(precision_name(p)));
                    CAPTURE(to_string(mode));
                    const Run want = run(dev, nc.cfg, p, mode, false);
                    const Run got = run(dev, nc.cfg, p, mode, true);
                    REQUIRE(got.fb.losses.size() == want.fb.losses.size());
                    for (size_t i = 0; i < got.fb.losses.size(); ++i) {
                        CHECK(got.fb.losses[i].ce == want.fb.losses[i].ce);
                        CHECK(got.fb.losses[i].aux == want.fb.losses[i].aux);
                        CHECK(got.fb.losses[i].z == want.fb.losses[i].z);
                    }
                    bits::check_bits(got.fb.grads, want.fb.grads, "gradients", &want.layout);
                    bits::check_bits(got.logits, want.logits, "logits");
                    CHECK(got.fb.routing == want.fb.routing);
                    const int64_t saved = 2 * elements16(nc.cfg, mode, int64_t{kB} * kT);
                    CHECK(saved > 0);
                    CHECK(want.workspace_bytes - got.workspace_bytes == saved);
                }
            }
        }
    });
}

TEST_CASE("act16: the 16-bit tensors have the compute dtype; fp32 and inference keep f32") {
    const auto devices = test::test_devices();
    Device& dev = *devices.front().dev;
    for (const auto& nc : configs()) {
        CAPTURE(nc.name);
        Model m(dev, nc.cfg);
        const Workspace& f32 = ModelAccess::impl(m).workspaces.get(kB, kT, true);
        const int64_t fp32_bytes = f32.bytes;
        for (const Tensor* t : tensors_of(f32)) CHECK((!*t || t->dtype == DType::f32));
        CHECK_FALSE(f32.dlogits16);
        CHECK_FALSE(f32.g.dy16);
        // The switch alone changes nothing in fp32.
        ModelAccess::impl(m).workspaces.set_activations16(false);
        CHECK(ModelAccess::impl(m).workspaces.get(kB, kT, true).bytes == fp32_bytes);
        ModelAccess::impl(m).workspaces.set_activations16(true);

        m.set_precision(Precision::bf16);  // replans the training workspace
        const Workspace& ws = ModelAccess::impl(m).workspaces.get(kB, kT, true);
        CHECK(ws.stored16 == DType::bf16);
        // The gradients both products of a layer read are rounded once: dy16 and dlogits16
        // (bf16, in either storage mode), absent in fp32.
        const int64_t N = int64_t{kB} * kT;
        const int64_t grads16 = ws.g.dy16.numel() + ws.dlogits16.numel();
        CHECK(ws.bytes == fp32_bytes - 2 * elements16(nc.cfg, Recompute::none, N) + 2 * grads16);
        CHECK(ws.dlogits16.dtype == DType::bf16);
        CHECK(ws.dlogits16.numel() == ws.logits.numel());
        CHECK(ws.g.dy16.dtype == DType::bf16);
        CHECK(ws.g.dy16.numel() >= N * nc.cfg.d_model);
        for (const LayerActs& a : ws.layers) {
            CHECK(a.n1.y.dtype == DType::bf16);
            CHECK_FALSE(a.n1.y32);  // the norm op writes the 16-bit y itself
            CHECK(a.x_mid.dtype == DType::f32);
            CHECK(a.attn.o.dtype == DType::f32);
            if (a.moe.xg) {
                CHECK(a.moe.xg.dtype == DType::bf16);
                CHECK(a.moe.yrows.dtype == DType::f32);
                CHECK(a.moe.experts.h.dtype == DType::bf16);
                // A 16-bit FFN-norm output (hash routing) is widened into nf.y for the gather.
                if (a.n2.y.dtype == DType::bf16)
                    CHECK(a.n2.y32.buf == ws.nf.y.buf);
                else
                    CHECK_FALSE(a.n2.y32);
                CHECK(a.moe.experts.up.dtype == DType::f32);
            } else {
                CHECK(a.ffn.h.dtype == DType::bf16);
                CHECK_FALSE(a.n2.y32);
            }
        }
        CHECK(ws.nf.y.dtype == DType::f32);
        const Workspace& inf = ModelAccess::impl(m).workspaces.get(kB, kT + 1, false);
        for (const Tensor* t : tensors_of(inf)) CHECK((!*t || t->dtype == DType::f32));
        CHECK_FALSE(inf.dlogits16);
        m.set_precision(Precision::fp32);  // back to f32 storage
        CHECK(ModelAccess::impl(m).workspaces.get(kB, kT, true).bytes == fp32_bytes);
    }
}
