// Mixture-of-Experts FFN (MODEL.md 2-3), read top to bottom as route -> dispatch -> grouped
// expert FFN -> combine -> shared experts:
// - route: softmax / sigmoid top-k routing (selection by score + expert bias, routed scaling)
//   or hash routing; in training micro-batches with a capacity, the admission of the
//   selections in slot-then-token priority order (over every rank's rows when data parallel:
//   RoutingStats); a stable sort of the admitted (token, slot) pairs by expert and a gather of
//   the routed rows, so every expert owns one contiguous block;
// - dispatch and experts: the TokenDispatcher brings the rows to the rank holding their experts
//   and the grouped expert FFN runs over every block that arrived (grouped GEMMs that read the
//   expert counts on the device: no host read inside the layer; rows past the admitted total
//   are never read), the outputs coming back in the sorted order;
// - combine: a weighted sum back into the residual stream (dropped selections contribute
//   nothing), then the always-on shared experts, and the aux / z losses.
// The backward mirrors it. The layer sees no rank: models/layers/moe_parallel.h.
#include "layers/layers.h"

namespace moetrain {
namespace {

LinearW router_of(const ModelConfig& c, const Tensor& w) {
    return {w, Tensor{}, c.moe->n_experts, c.d_model};
}

bool drops(const MoeRouting& r) {
    return r.capacity >= 0;
}

// The router's selections (top-k or hash), and with a capacity their admission: a.topk_idx,
// and a.counts / a.row_token / a.slot_row of the rows sorted by expert. `forward` (not the
// backward's recompute) exchanges the admission offsets over the ranks of the micro-batch.
void route(Device& dev, const ModelConfig& c, const LayerW& w, const Tensor& xn, MoeActs& a,
           const MoePass& p, bool forward) {
    const MoeConfig& m = *c.moe;
    const int64_t E = m.n_experts, k = m.active_k(), N = p.N;
    if (m.topk_router()) {
        linear_fwd(dev, a.logits, xn, router_of(c, w.router), N, 0.0f);
        dev.router_fwd(a.probs, a.lse, a.topk_idx, a.topk_w, a.logits, p.route.bias, N, E, k,
                       router_args(m));
    } else {
        dev.hash_route(a.topk_idx, p.ids, N, p.layer, E);
    }
    if (!drops(p.route)) {
        dev.moe_sort(a.counts, a.row_token, a.slot_row, a.topk_idx, N, k, E);
        return;
    }
    MT_CHECK(a.kept_idx, "MoE layer ", p.layer, ": this workspace has no capacity buffers");
    const Tensor offsets =
        p.stats->admission_offsets(dev, a.topk_idx, p.route.offsets, N, k, E, forward);
    dev.moe_capacity(a.kept_idx, a.chosen, a.topk_idx, offsets, N, k, E, p.route.capacity);
    dev.moe_sort(a.counts, a.row_token, a.slot_row, a.kept_idx, N, k, E);
}

// The selections per expert before any dropping (f_e of the aux loss, the bias update, the
// loads) over the micro-batch: summed over its ranks when `exchange` (the forward).
Tensor chosen_counts(Device& dev, const MoeActs& a, const MoePass& p, bool exchange) {
    return p.stats->micro_batch_counts(dev, drops(p.route) ? a.chosen : a.counts, p.route.counts,
                                       exchange);
}

// The aux / z weights of this rank's share of the micro-batch (docs/DISTRIBUTED.md).
float aux_alpha(const MoeConfig& m, const MoePass& p) {
    return static_cast<float>(m.aux_loss_alpha) * p.stats->aux_share();
}
float z_alpha(const MoeConfig& m, const MoePass& p) {
    return static_cast<float>(m.z_loss_alpha) * p.stats->z_share();
}

void check_experts(const ModelConfig& c, const LayerW& w, const MoePass& p) {
    MT_CHECK(w.experts.G == p.dispatcher->local_experts(), "MoE layer ", p.layer, ": a pass over ",
             w.experts.G, " experts of ", c.moe->n_experts, " with the ", p.dispatcher->name(),
             " dispatcher, which runs ", p.dispatcher->local_experts(), " here");
}

}  // namespace

RouterArgs router_args(const MoeConfig& m) {
    RouterArgs r;
    r.sigmoid = m.router == RouterKind::sigmoid_topk;
    r.norm_topk = m.norm_topk_prob;
    r.scaling = static_cast<float>(m.routed_scaling);
    return r;
}

void moe_fwd(Device& dev, const ModelConfig& c, const LayerW& w, const Tensor& xn, MoeActs& a,
             const Tensor& x_res, const Tensor& aux_stats, const MoePass& p) {
    const MoeConfig& m = *c.moe;
    const int64_t E = m.n_experts, k = m.active_k(), D = c.d_model, N = p.N;
    const bool topk = m.topk_router(), forward = static_cast<bool>(aux_stats);
    check_experts(c, w, p);

    route(dev, c, w, xn, a, p, forward);
    if (p.record) {  // gradient checks only (a debugging path): this host read is allowed
        std::vector<int32_t> chosen(static_cast<size_t>(N * k));
        dev.download(chosen.data(), a.topk_idx.view(0, {N * k}));
        p.record->insert(p.record->end(), chosen.begin(), chosen.end());
    }
    if (forward) {  // the statistics once (a recompute adds no loss and no counts)
        const Tensor counts = chosen_counts(dev, a, p, true);
        if (p.route.step_counts) dev.add_counts(p.route.step_counts, counts, E);
        if (topk)
            dev.router_aux_loss(aux_stats, a.probs, a.lse, counts, N, E, k, router_args(m),
                                aux_alpha(m, p), z_alpha(m, p));
    }
    if (a.xg.dtype == DType::f32) {
        dev.gather_rows(a.xg, xn, a.row_token, N * k, D);
    } else {  // 16-bit storage: gathered in f32 into yrows (written later), then converted
        dev.gather_rows(a.yrows, xn, a.row_token, N * k, D);
        dev.convert(a.xg, a.yrows);
    }

    p.dispatcher->forward(dev, p.moe_layer, a, N * k, [&](const ExpertBlock& b) {
        ffn_fwd(dev, c.ffn, w.experts, FfnRows::experts(b.rows, b.counts, b.groups), b.x, b.acts,
                b.y, 0.0f);
    });

    if (x_res)
        dev.moe_combine(x_res, a.yrows, a.slot_row, topk ? a.topk_w : Tensor{}, N, k, D, true);
    if (w.shared.present())
        ffn_fwd(dev, c.ffn, w.shared, FfnRows::dense(N), xn, a.shared, x_res, 1.0f);
}

void moe_bwd(Device& dev, const ModelConfig& c, const LayerW& w, const LayerW& gw, const Tensor& xn,
             const MoeActs& a, const Tensor& dres, const GradScratch& g, const Tensor& dxn,
             float grad_scale, const MoePass& p) {
    const MoeConfig& m = *c.moe;
    const int64_t E = m.n_experts, k = m.active_k(), D = c.d_model, N = p.N;
    const bool topk = m.topk_router();
    const bool shared = w.shared.present();
    check_experts(c, w, p);

    // Combine: drows = w * dy for every admitted row, dw = dy . expert output (0 if dropped).
    dev.moe_combine_bwd(g.drows, topk ? g.dw : Tensor{}, dres, a.yrows, a.slot_row,
                        topk ? a.topk_w : Tensor{}, N, k, D);
    // The experts' backward over the rows the dispatcher brings, the shared experts' (dxn
    // written first) while they travel.
    p.dispatcher->backward(
        dev, p.moe_layer, a, g, N * k,
        [&](const ExpertGradBlock& b) {
            const ExpertBlock& x = b.block;
            ffn_bwd(dev, c.ffn, w.experts, gw.experts, FfnRows::experts(x.rows, x.counts, x.groups),
                    x.x, x.acts, b.dy, b.scratch, b.dx, false);
        },
        [&] {
            if (shared)
                ffn_bwd(dev, c.ffn, w.shared, gw.shared, FfnRows::dense(N), xn, a.shared, dres, g,
                        dxn, false);
        });
    // Undo the gather: each token sums the gradients of its admitted rows.
    dev.moe_combine(dxn, g.dxg, a.slot_row, Tensor{}, N, k, D, shared);
    if (!topk) return;

    dev.router_bwd(g.dlogits, g.dw, a.probs, a.lse, a.logits, a.topk_idx, a.topk_w,
                   chosen_counts(dev, a, p, false), N, E, k, router_args(m), aux_alpha(m, p),
                   z_alpha(m, p), grad_scale);
    linear_bwd(dev, dxn, router_of(c, gw.router), g.dlogits, xn, router_of(c, w.router), N, true);
}

}  // namespace moetrain
