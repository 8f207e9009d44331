// Output head (MODEL.md 2-3): final norm, logits = x @ W_out^T (lm_head or the tied token
// embedding) and the cross-entropy loss. Logits are produced in row chunks so the [N, V]
// matrix never exists at once; during training each chunk's backward (dW_out, dx) runs right
// after its cross-entropy, while the chunk is in memory.
#include <algorithm>

#include "layers/layers.h"

namespace moetrain {
namespace {

LinearW out_proj(const ModelConfig& c, const Tensor& w) {
    return {w, Tensor{}, c.vocab_size, c.d_model};
}

// Calls fn(r0, rows) for each chunk of logits rows.
template <typename Fn>
void for_each_chunk(const Workspace& ws, Fn&& fn) {
    for (int64_t r0 = 0; r0 < ws.N; r0 += ws.logit_rows) fn(r0, std::min(ws.logit_rows, ws.N - r0));
}

}  // namespace

void head_fwd(Device& dev, const ModelConfig& c, const ModelW& w, const ModelW* gw, Workspace& ws,
              float ce_scale, float grad_scale, const Tensor& ce_out) {
    const int64_t D = c.d_model, V = c.vocab_size;
    norm_fwd(dev, c, w.norm_f, ws.x_final, ws.nf, ws.N);
    for_each_chunk(ws, [&](int64_t r0, int64_t rows) {
        const Tensor logits = ws.logits.view(0, {rows, V});
        const Tensor xf = ws.nf.y.view(r0 * D, {rows, D});
        linear_fwd(dev, logits, xf, out_proj(c, w.lm_head), rows, 0.0f);
        // d loss / d logits: over the logits, or under 16-bit products rounded once by the
        // cross-entropy itself into dlogits16 for both gradient products (each would otherwise
        // round its own copy).
        const Tensor dlogits = gw && ws.dlogits16 ? ws.dlogits16.view(0, {rows, V}) : logits;
        dev.cross_entropy(ws.losses.view(r0, {rows}), logits, ws.targets.view(r0, {rows}), rows, V,
                          gw ? grad_scale : 0.0f, dlogits);
        if (!gw) return;
        linear_bwd(dev, ws.g.dxn.view(r0 * D, {rows, D}), out_proj(c, gw->lm_head), dlogits, xf,
                   out_proj(c, w.lm_head), rows, false);
    });
    dev.sum(ce_out, ws.losses, ws.N, ce_scale, true);
    if (gw)
        norm_bwd(dev, c, w.norm_f, gw->norm_f, ws.g.dxn, ws.x_final, ws.nf, ws.g.dres, ws.N, false);
}

std::vector<float> head_logits(Device& dev, const ModelConfig& c, const ModelW& w, Workspace& ws) {
    const int64_t D = c.d_model, V = c.vocab_size;
    std::vector<float> out(static_cast<size_t>(ws.N * V));
    norm_fwd(dev, c, w.norm_f, ws.x_final, ws.nf, ws.N);
    for_each_chunk(ws, [&](int64_t r0, int64_t rows) {
        const Tensor logits = ws.logits.view(0, {rows, V});
        linear_fwd(dev, logits, ws.nf.y.view(r0 * D, {rows, D}), out_proj(c, w.lm_head), rows,
                   0.0f);
        dev.download(out.data() + r0 * V, logits);
    });
    return out;
}

void head_last_logits(Device& dev, const ModelConfig& c, const ModelW& w, const Workspace& ws,
                      const Tensor& logits) {
    const int64_t D = c.d_model, T = ws.T;
    norm_fwd(dev, c, w.norm_f, ws.x_final, ws.nf, ws.N);
    // Row b of x is position T-1 of sequence b: a strided view of the normed rows.
    GemmArgs g = linear_fwd_gemm(logits, ws.nf.y.view((T - 1) * D, {(ws.B - 1) * T * D + D}),
                                 out_proj(c, w.lm_head), ws.B, 0.0f);
    g.lda = T * D;
    dev.gemm(g);
}

}  // namespace moetrain
