// Mixture-of-Experts FFN (MODEL.md 2-3): softmax top-k or hash routing, a stable sort of the
// (token, slot) pairs by expert, a gather of the routed rows so every expert owns one
// contiguous block (the expert products are grouped GEMMs that read the expert counts on the
// device: no host read inside the layer), a weighted combine back into the residual stream,
// always-on shared experts, the aux / z losses, and the backward of all of it. Dropless:
// every routed row is computed, so the N*k rows are exactly filled by the experts.
#include "layers/layers.h"
#include "layers/moe_dispatch.h"

namespace moetrain {
namespace {

LinearW router_of(const ModelConfig& c, const Tensor& w) {
    return {w, Tensor{}, c.moe->n_experts, c.d_model};
}

// The aux / z weights of this rank's share (docs/DISTRIBUTED.md; the weights themselves in one
// process) and the expert counts f_e is computed from.
float aux_alpha(const MoeConfig& m, const MoeGlobal* g) {
    return static_cast<float>(m.aux_loss_alpha) * (g ? g->aux_share() : 1.0f);
}
float z_alpha(const MoeConfig& m, const MoeGlobal* g) {
    return static_cast<float>(m.z_loss_alpha) * (g ? g->z_share() : 1.0f);
}
const Tensor& f_counts(const MoeActs& a, const MoeGlobal* g) {
    return g ? g->counts : a.counts;
}

}  // namespace

void moe_fwd(Device& dev, const ModelConfig& c, int layer, const LayerW& w, const Tensor& xn,
             const Tensor& ids, MoeActs& a, const Tensor& x_res, const Tensor& aux_stats, int64_t N,
             std::vector<int32_t>* routing, const MoeGlobal* global) {
    const MoeConfig& m = *c.moe;
    const int64_t E = m.n_experts, k = m.active_k(), D = c.d_model;
    const bool softmax = m.router == RouterKind::softmax_topk;
    if (softmax) {
        linear_fwd(dev, a.logits, xn, router_of(c, w.router), N, 0.0f);
        dev.router_fwd(a.probs, a.lse, a.topk_idx, a.topk_w, a.logits, N, E, k, m.norm_topk_prob);
    } else {
        dev.hash_route(a.topk_idx, ids, N, layer, E);
    }
    dev.moe_sort(a.counts, a.row_token, a.slot_row, a.topk_idx, N, k, E);
    if (global) {  // f_e and the expert loads over every rank's rows
        dev.copy(global->counts, a.counts);
        global->comm->all_reduce(dev, global->counts, ReduceOp::sum);
    }
    if (routing) {  // gradient checks only (a debugging path): this host read is allowed
        std::vector<int32_t> chosen(static_cast<size_t>(N * k));
        dev.download(chosen.data(), a.topk_idx.view(0, {N * k}));
        routing->insert(routing->end(), chosen.begin(), chosen.end());
    }
    if (softmax && aux_stats)
        dev.router_aux_loss(aux_stats, a.probs, a.lse, f_counts(a, global), N, E, k,
                            aux_alpha(m, global), z_alpha(m, global));

    if (a.xg.dtype == DType::f32) {
        dev.gather_rows(a.xg, xn, a.row_token, N * k, D);
    } else {  // 16-bit storage: gathered in f32 into yrows (written later), then converted
        dev.gather_rows(a.yrows, xn, a.row_token, N * k, D);
        dev.convert(a.xg, a.yrows);
    }
    moe_experts_fwd(dev, c, w.experts, a, N * k, global ? global->dispatch : nullptr);
    if (x_res)
        dev.moe_combine(x_res, a.yrows, a.slot_row, softmax ? a.topk_w : Tensor{}, N, k, D, true);
    if (w.shared.present())
        ffn_fwd(dev, c.ffn, w.shared, FfnRows::dense(N), xn, a.shared, x_res, 1.0f);
}

void moe_bwd(Device& dev, const ModelConfig& c, const LayerW& w, const LayerW& gw, const Tensor& xn,
             const MoeActs& a, const Tensor& dres, const GradScratch& g, const Tensor& dxn,
             int64_t N, float grad_scale, const MoeGlobal* global) {
    const MoeConfig& m = *c.moe;
    const int64_t E = m.n_experts, k = m.active_k(), D = c.d_model;
    const bool softmax = m.router == RouterKind::softmax_topk;
    const bool shared = w.shared.present();
    if (shared)
        ffn_bwd(dev, c.ffn, w.shared, gw.shared, FfnRows::dense(N), xn, a.shared, dres, g, dxn,
                false);

    // Combine: drows = w * dy for every routed row, dw = dy . expert output.
    dev.moe_combine_bwd(g.drows, softmax ? g.dw : Tensor{}, dres, a.yrows, a.slot_row,
                        softmax ? a.topk_w : Tensor{}, N, k, D);
    moe_experts_bwd(dev, c, w.experts, gw.experts, a, g, N * k,
                    global ? global->dispatch : nullptr);
    // Undo the gather: each token sums the gradients of its k rows.
    dev.moe_combine(dxn, g.dxg, a.slot_row, Tensor{}, N, k, D, shared);
    if (!softmax) return;

    dev.router_bwd(g.dlogits, g.dw, a.probs, a.lse, a.topk_idx, a.topk_w, f_counts(a, global), N, E,
                   k, m.norm_topk_prob, aux_alpha(m, global), z_alpha(m, global), grad_scale);
    linear_bwd(dev, dxn, router_of(c, gw.router), g.dlogits, xn, router_of(c, w.router), N, true);
}

}  // namespace moetrain
