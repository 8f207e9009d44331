// Mixture-of-Experts FFN (MODEL.md 2-3): softmax / sigmoid top-k routing (selection by score +
// expert bias, routed scaling) or hash routing; in training micro-batches with a capacity, the
// admission of the selections in slot-then-token priority order; a stable sort of the admitted
// (token, slot) pairs by expert, a gather of the routed rows so every expert owns one
// contiguous block (the expert products are grouped GEMMs that read the expert counts on the
// device: no host read inside the layer), a weighted combine back into the residual stream
// (dropped selections contribute nothing), always-on shared experts, the aux / z losses, and
// the backward of all of it. Rows past the admitted total are never read by the grouped GEMMs.
#include "layers/layers.h"
#include "layers/moe_dispatch.h"

namespace moetrain {
namespace {

LinearW router_of(const ModelConfig& c, const Tensor& w) {
    return {w, Tensor{}, c.moe->n_experts, c.d_model};
}

// The aux / z weights of this rank's share (docs/DISTRIBUTED.md; the weights themselves in one
// process).
float aux_alpha(const MoeConfig& m, const MoeGlobal* g) {
    return static_cast<float>(m.aux_loss_alpha) * (g ? g->aux_share() : 1.0f);
}
float z_alpha(const MoeConfig& m, const MoeGlobal* g) {
    return static_cast<float>(m.z_loss_alpha) * (g ? g->z_share() : 1.0f);
}
bool drops(const MoeRouting& r) {
    return r.capacity >= 0;
}
// The selections per expert before any dropping (f_e of the aux loss, the bias update, the
// loads): this rank's, or every rank's in a data-parallel pass.
const Tensor& chosen_counts(const MoeActs& a, const MoeRouting& r, const MoeGlobal* g) {
    if (g) return g->counts;
    return drops(r) ? a.chosen : a.counts;
}

}  // namespace

RouterArgs router_args(const MoeConfig& m) {
    RouterArgs r;
    r.sigmoid = m.router == RouterKind::sigmoid_topk;
    r.norm_topk = m.norm_topk_prob;
    r.scaling = static_cast<float>(m.routed_scaling);
    return r;
}

void moe_fwd(Device& dev, const ModelConfig& c, int layer, const LayerW& w, const Tensor& xn,
             const Tensor& ids, MoeActs& a, const Tensor& x_res, const Tensor& aux_stats, int64_t N,
             std::vector<int32_t>* routing, const MoeRouting& route, const MoeGlobal* global,
             MoeDispatch* ep) {
    const MoeConfig& m = *c.moe;
    const int64_t E = m.n_experts, k = m.active_k(), D = c.d_model;
    const bool topk = m.topk_router();
    const RouterArgs ra = router_args(m);
    if (topk) {
        linear_fwd(dev, a.logits, xn, router_of(c, w.router), N, 0.0f);
        dev.router_fwd(a.probs, a.lse, a.topk_idx, a.topk_w, a.logits, route.bias, N, E, k, ra);
    } else {
        dev.hash_route(a.topk_idx, ids, N, layer, E);
    }
    if (drops(route)) {
        MT_CHECK(a.kept_idx, "MoE layer ", layer, ": this workspace has no capacity buffers");
        if (route.ranks && aux_stats) {  // the forward (a recompute reuses the offsets)
            const Communicator& r = *route.ranks;
            dev.moe_capacity_shares(route.shares, a.topk_idx, N, k, E, r.rank(), r.size());
            route.ranks->reduce_scatter(dev, route.shares, route.offsets);
        }
        dev.moe_capacity(a.kept_idx, a.chosen, a.topk_idx, route.ranks ? route.offsets : Tensor{},
                         N, k, E, route.capacity);
        dev.moe_sort(a.counts, a.row_token, a.slot_row, a.kept_idx, N, k, E);
    } else {
        dev.moe_sort(a.counts, a.row_token, a.slot_row, a.topk_idx, N, k, E);
    }
    if (global) {  // f_e and the expert loads over every rank's rows
        dev.copy(global->counts, drops(route) ? a.chosen : a.counts);
        global->comm->all_reduce(dev, global->counts, ReduceOp::sum);
    }
    if (routing) {  // gradient checks only (a debugging path): this host read is allowed
        std::vector<int32_t> chosen(static_cast<size_t>(N * k));
        dev.download(chosen.data(), a.topk_idx.view(0, {N * k}));
        routing->insert(routing->end(), chosen.begin(), chosen.end());
    }
    if (aux_stats && route.step_counts)  // the forward counts once (a recompute passes none)
        dev.add_counts(route.step_counts, chosen_counts(a, route, global), E);
    if (topk && aux_stats)
        dev.router_aux_loss(aux_stats, a.probs, a.lse, chosen_counts(a, route, global), N, E, k, ra,
                            aux_alpha(m, global), z_alpha(m, global));

    if (a.xg.dtype == DType::f32) {
        dev.gather_rows(a.xg, xn, a.row_token, N * k, D);
    } else {  // 16-bit storage: gathered in f32 into yrows (written later), then converted
        dev.gather_rows(a.yrows, xn, a.row_token, N * k, D);
        dev.convert(a.xg, a.yrows);
    }
    moe_experts_fwd(dev, c, w.experts, a, N * k, ep);
    if (x_res)
        dev.moe_combine(x_res, a.yrows, a.slot_row, topk ? a.topk_w : Tensor{}, N, k, D, true);
    if (w.shared.present())
        ffn_fwd(dev, c.ffn, w.shared, FfnRows::dense(N), xn, a.shared, x_res, 1.0f);
}

void moe_bwd(Device& dev, const ModelConfig& c, const LayerW& w, const LayerW& gw, const Tensor& xn,
             const MoeActs& a, const Tensor& dres, const GradScratch& g, const Tensor& dxn,
             int64_t N, float grad_scale, const MoeRouting& route, const MoeGlobal* global,
             MoeDispatch* ep) {
    const MoeConfig& m = *c.moe;
    const int64_t E = m.n_experts, k = m.active_k(), D = c.d_model;
    const bool topk = m.topk_router();
    const bool shared = w.shared.present();
    if (shared)
        ffn_bwd(dev, c.ffn, w.shared, gw.shared, FfnRows::dense(N), xn, a.shared, dres, g, dxn,
                false);

    // Combine: drows = w * dy for every admitted row, dw = dy . expert output (0 if dropped).
    dev.moe_combine_bwd(g.drows, topk ? g.dw : Tensor{}, dres, a.yrows, a.slot_row,
                        topk ? a.topk_w : Tensor{}, N, k, D);
    moe_experts_bwd(dev, c, w.experts, gw.experts, a, g, N * k, ep);
    // Undo the gather: each token sums the gradients of its admitted rows.
    dev.moe_combine(dxn, g.dxg, a.slot_row, Tensor{}, N, k, D, shared);
    if (!topk) return;

    dev.router_bwd(g.dlogits, g.dw, a.probs, a.lse, a.logits, a.topk_idx, a.topk_w,
                   chosen_counts(a, route, global), N, E, k, router_args(m), aux_alpha(m, global),
                   z_alpha(m, global), grad_scale);
    linear_bwd(dev, dxn, router_of(c, gw.router), g.dlogits, xn, router_of(c, w.router), N, true);
}

}  // namespace moetrain
