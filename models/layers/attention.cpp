// Causal self-attention (MODEL.md 2): q/k/v projections, half-split RoPE with the NTK-adjusted
// base, MHA/GQA/MQA through the kv-head mapping of Device::attention_fwd, output projection
// into the residual stream. The KV-cache path (generation) appends the new keys/values to the
// cache and attends over positions 0 .. p + T - 1, where p = pos0 (+ the slot's device-side
// position, read by the ops when they run). Backward side by side.
#include <cmath>

#include "layers/layers.h"

namespace moetrain {

namespace {

float attn_scale(const ModelConfig& c) {
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
}

// Rotates q [B,T,H,h] and k [B,T,K,h] in place (inverse = the backward rotation).
void rope_qk(Device& dev, const ModelConfig& c, const Tensor& q, const Tensor& k, int B, int T,
             int64_t pos0, const Tensor& pos_dev, bool inverse) {
    if (c.pos != PosKind::rope) return;
    const float theta = static_cast<float>(c.rope_theta_eff());
    dev.rope(q, B, T, c.n_heads, c.head_dim, theta, pos0, pos_dev, inverse);
    dev.rope(k, B, T, c.n_kv_heads, c.head_dim, theta, pos0, pos_dev, inverse);
}

// Whether `second` starts right where `first` ([n] elements) ends, in the same buffer.
bool follows(const Tensor& first, const Tensor& second, int64_t n) {
    return first.buf == second.buf && first.dtype == second.dtype &&
           second.offset == first.offset + n;
}

// cache.k/v[b, p + t] = k/v[b, t]: one kv_append over 2B "batches" when the keys' and values'
// caches and rows each lie back to back (generate's caches, the planned workspaces), else two.
void append_kv(Device& dev, const KvSlot& cache, const AttnActs& a, int B, int T, int64_t kv_row,
               int64_t pos0, const Tensor& pos_dev) {
    const int64_t cache_n = int64_t{B} * cache.S * kv_row, rows_n = int64_t{B} * T * kv_row;
    if (follows(cache.k, cache.v, cache_n) && follows(a.k, a.v, rows_n)) {
        dev.kv_append(cache.k.view(0, {2 * int64_t{B}, cache.S, kv_row}),
                      a.k.view(0, {2 * int64_t{B}, T, kv_row}), 2 * B, T, cache.S, kv_row, pos0,
                      pos_dev);
        return;
    }
    dev.kv_append(cache.k, a.k, B, T, cache.S, kv_row, pos0, pos_dev);
    dev.kv_append(cache.v, a.v, B, T, cache.S, kv_row, pos0, pos_dev);
}

}  // namespace

void attention_fwd(Device& dev, const ModelConfig& c, const AttnW& w, const Tensor& xn,
                   const AttnActs& a, const Tensor& x_res, int B, int T, const KvSlot* cache,
                   DType compute) {
    const int64_t N = int64_t{B} * T, kv_row = int64_t{c.n_kv_heads} * c.head_dim;
    linear_fwd(dev, a.q, xn, w.wq, N, 0.0f);
    linear_fwd(dev, a.k, xn, w.wk, N, 0.0f);
    linear_fwd(dev, a.v, xn, w.wv, N, 0.0f);
    const int64_t pos0 = cache ? cache->pos0 : 0;
    const Tensor pos_dev = cache ? cache->pos_dev : Tensor{};
    rope_qk(dev, c, a.q, a.k, B, T, pos0, pos_dev, false);

    AttnDims d{B, T, T, T, c.n_heads, c.n_kv_heads, c.head_dim};
    d.compute = compute;
    Tensor keys = a.k, values = a.v;
    if (cache) {
        MT_CHECK(pos0 + T <= cache->S, "KV cache overflow: positions up to ", pos0 + T,
                 " but the cache holds ", cache->S);
        append_kv(dev, *cache, a, B, T, kv_row, pos0, pos_dev);
        keys = cache->k;
        values = cache->v;
        d.Tk = pos0 + T;
        d.S = cache->S;
        d.tk_dev = pos_dev;
    }
    dev.attention_fwd(a.o, a.lse, a.q, keys, values, d, attn_scale(c));
    linear_fwd(dev, x_res, a.o, w.wo, N, 1.0f);
}

void attention_bwd(Device& dev, const ModelConfig& c, const AttnW& w, const AttnW& gw,
                   const Tensor& xn, const AttnActs& a, const Tensor& dres, const GradScratch& g,
                   const Tensor& dxn, int B, int T, DType compute) {
    const int64_t N = int64_t{B} * T;
    linear_bwd(dev, g.d_o, gw.wo, dres, a.o, w.wo, N, false, g.dy16);
    AttnDims d{B, T, T, T, c.n_heads, c.n_kv_heads, c.head_dim};
    d.compute = compute;
    dev.attention_bwd(g.dq, g.dk, g.dv, g.d_o, a.q, a.k, a.v, a.o, a.lse, d, attn_scale(c));
    rope_qk(dev, c, g.dq, g.dk, B, T, 0, Tensor{}, true);
    linear_bwd(dev, dxn, gw.wq, g.dq, xn, w.wq, N, false, g.dy16);
    linear_bwd(dev, dxn, gw.wk, g.dk, xn, w.wk, N, true, g.dy16);
    linear_bwd(dev, dxn, gw.wv, g.dv, xn, w.wv, N, true, g.dy16);
}

}  // namespace moetrain
