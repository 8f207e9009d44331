// Plans the activation and scratch buffers of one (B, T) shape (see workspace.h).
#include "model/workspace.h"

#include <atomic>

#include <algorithm>

namespace moetrain {
namespace {

struct Planner {
    Device& dev;
    const ModelConfig& c;
    int64_t N;
    int64_t& bytes;  // running total of what was allocated
    DType lo;        // dtype of the activations only matrix products read (f32 or 16-bit)
    bool training;   // a training workspace (the capacity buffers of MoE layers)
    bool fuse_gelu;  // FfnActs::fuse_gelu of every FFN

    Tensor alloc(DType t, Shape s) const {
        bytes += s.numel() * static_cast<int64_t>(dtype_size(t));
        return dev.alloc(t, s);
    }
    Tensor f32(Shape s) const { return alloc(DType::f32, s); }
    Tensor i32(Shape s) const { return alloc(DType::i32, s); }
    Tensor gemm_only(Shape s) const { return alloc(lo, s); }

    // y_gemm_only: only matrix products read y (16-bit storage allowed).
    NormActs norm(bool y_gemm_only) const {
        NormActs a;
        a.y = y_gemm_only ? gemm_only({N, c.d_model}) : f32({N, c.d_model});
        if (c.norm == NormKind::layernorm) a.mean = f32({N});
        a.rstd = f32({N});
        return a;
    }
    FfnActs ffn(int64_t rows, int64_t F) const {
        FfnActs a;
        if (c.ffn == FfnKind::swiglu) a.gate = f32({rows, F});
        a.up = f32({rows, F});
        a.h = gemm_only({rows, F});
        a.fuse_gelu = fuse_gelu;
        return a;
    }
    MoeActs moe() const {
        const MoeConfig& m = *c.moe;
        const int64_t E = m.n_experts, k = m.active_k(), D = c.d_model;
        MoeActs a;
        if (m.topk_router()) {
            a.logits = f32({N, E});
            a.probs = f32({N, E});
            a.lse = f32({N});
            a.topk_w = f32({N, k});
        }
        a.topk_idx = i32({N, k});
        a.counts = i32({E});
        if (training && m.capacity_factor > 0) {
            a.kept_idx = i32({N, k});
            a.chosen = i32({E});
            a.offsets = i32({k, E});
        }
        a.row_token = i32({N * k});
        a.slot_row = i32({N * k});
        a.xg = gemm_only({N * k, D});
        a.yrows = f32({N * k, D});
        a.experts = ffn(N * k, c.d_ff);
        if (m.n_shared_experts > 0) a.shared = ffn(N, int64_t{m.n_shared_experts} * c.d_ff);
        return a;
    }
    // The attention half of a layer: x_mid, both norms, q/k/v/o/lse. n2_gemm_only: only
    // matrix products read the FFN norm's output (norm2_gemm_only of every layer served).
    void attention_part(LayerActs& a, int B, int T, bool n2_gemm_only) const {
        const int64_t h = c.head_dim, H = c.n_heads, K = c.n_kv_heads;
        a.x_mid = f32({N, c.d_model});
        a.n1 = norm(true);
        a.n2 = norm(n2_gemm_only);
        a.attn.q = f32({N, H * h});
        const Tensor kv = f32({2, N, K * h});  // v right after k: one kv_append for both
        a.attn.k = kv.view(0, {N, K * h});
        a.attn.v = kv.view(N * K * h, {N, K * h});
        a.attn.o = f32({N, H * h});
        a.attn.lse = f32({int64_t{B} * H * T});
    }
    // The FFN half: dense and/or MoE buffers as asked.
    void ffn_part(LayerActs& a, bool dense, bool moe_part) const {
        if (dense) a.ffn = ffn(N, c.d_ff);
        if (moe_part) a.moe = moe();
    }
};

// Widest FFN hidden buffer any layer needs: dense [N, F], experts [N*k, F], shared [N, S*F].
int64_t widest_ffn(const ModelConfig& c, int64_t N) {
    int64_t n = N * c.d_ff;
    if (c.moe) {
        n = std::max(n, N * c.moe->active_k() * c.d_ff);
        n = std::max(n, N * c.moe->n_shared_experts * c.d_ff);
    }
    return n;
}

}  // namespace

int64_t logit_chunk_rows(int64_t N, int64_t V, int64_t budget) {
    return std::clamp<int64_t>(budget / std::max<int64_t>(V, 1), 1, std::max<int64_t>(N, 1));
}

uint64_t next_buffer_generation() {
    static std::atomic<uint64_t> next{1};
    return next++;
}

std::unique_ptr<Workspace> plan_workspace(Device& dev, const ModelConfig& c, int B, int T,
                                          bool training, int64_t logit_budget, Recompute recompute,
                                          DType stored16, DType grads16) {
    auto ws = std::make_unique<Workspace>();
    ws->generation = next_buffer_generation();
    ws->B = B;
    ws->T = T;
    ws->N = int64_t{B} * T;
    ws->training = training;
    ws->recompute = training ? recompute : Recompute::none;
    ws->stored16 = training ? stored16 : DType::f32;
    ws->grads16 = training ? grads16 : DType::f32;
    const int64_t N = ws->N, D = c.d_model, V = c.vocab_size;
    // The dense GELU is the up projection's epilogue except in training under 16-bit products
    // (FfnActs::fuse_gelu).
    Planner p{dev, c, N, ws->bytes, ws->stored16, training, ws->grads16 == DType::f32};
    ws->ids = p.i32({N});
    ws->targets = p.i32({N});
    ws->pos_ids = p.i32({N});

    bool any_dense = false, any_moe = false, all_n2_gemm_only = true;
    for (int l = 0; l < c.n_layers; ++l) {
        (c.is_moe_layer(l) ? any_moe : any_dense) = true;
        all_n2_gemm_only = all_n2_gemm_only && norm2_gemm_only(c, l);
    }
    if (training) {
        // Buffers every layer shares: the whole layer but its input (block) or the FFN / MoE
        // part (ffn); the backward re-runs the layer's forward into them.
        LayerActs shared;
        if (recompute == Recompute::block) p.attention_part(shared, B, T, all_n2_gemm_only);
        if (recompute != Recompute::none) p.ffn_part(shared, any_dense, any_moe);
        // Residual stream: L + 1 distinct layer inputs, x_in(l+1) = output of layer l.
        Tensor x = p.f32({N, D});
        for (int l = 0; l < c.n_layers; ++l) {
            LayerActs a = shared;
            if (recompute != Recompute::block) p.attention_part(a, B, T, norm2_gemm_only(c, l));
            if (recompute == Recompute::none) p.ffn_part(a, !c.is_moe_layer(l), c.is_moe_layer(l));
            a.x_in = x;
            x = p.f32({N, D});
            ws->layers.push_back(a);
        }
        ws->x_final = x;
    } else {
        LayerActs shared;
        p.attention_part(shared, B, T, all_n2_gemm_only);
        p.ffn_part(shared, any_dense, any_moe);
        shared.x_in = shared.x_mid;  // the residual stream is updated in place
        ws->layers.assign(static_cast<size_t>(c.n_layers), shared);
        ws->x_final = shared.x_in;
    }
    ws->nf = p.norm(false);  // f32: also where a hash-routed layer widens its 16-bit n2.y
    ws->logit_rows = logit_chunk_rows(N, V, logit_budget);
    ws->logits = p.f32({ws->logit_rows, V});
    if (ws->grads16 != DType::f32) ws->dlogits16 = p.alloc(ws->grads16, {ws->logit_rows, V});
    ws->losses = p.f32({N});

    if (training) {
        const int64_t h = c.head_dim, H = c.n_heads, K = c.n_kv_heads;
        GradScratch& g = ws->g;
        g.dres = p.f32({N, D});
        g.dxn = p.f32({N, D});
        g.dq = p.f32({N, H * h});
        g.dk = p.f32({N, K * h});
        g.dv = p.f32({N, K * h});
        g.d_o = p.f32({N, H * h});
        const int64_t wide = widest_ffn(c, N);
        g.dgate = p.f32({wide});
        g.dup = p.f32({wide});
        g.dh = p.f32({wide});
        if (any_moe) {
            const int64_t k = c.moe->active_k(), E = c.moe->n_experts;
            g.drows = p.f32({N * k, D});
            g.dxg = p.f32({N * k, D});
            g.dw = p.f32({N, k});
            g.dlogits = p.f32({N, E});
        }
        if (ws->grads16 != DType::f32) {
            // The widest output of a dense linear layer: attention's, the dense FFN's or the
            // shared experts' hidden (the routed experts' grouped products are not shared).
            int64_t cols = std::max({D, H * h, K * h});
            if (any_dense) cols = std::max<int64_t>(cols, c.d_ff);
            if (c.moe) cols = std::max<int64_t>(cols, int64_t{c.moe->n_shared_experts} * c.d_ff);
            g.dy16 = p.alloc(ws->grads16, {N, cols});
        }
    }
    bind_f32_transients(*ws);
    return ws;
}

}  // namespace moetrain
