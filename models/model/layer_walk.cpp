// ModelPasses' walk over the layers (model_passes.h): embedding -> L x (attention, FFN/MoE)
// forward, and the backward in reverse order, which first re-runs the part of a layer's forward
// its workspace dropped (Recompute block / ffn).
#include <cstddef>

#include "model/model_passes.h"

namespace moetrain {
namespace {

bool same_view(const Tensor& a, const Tensor& b) {
    return a.buf == b.buf && a.offset == b.offset;
}

}  // namespace

MoePass ModelPasses::moe_pass(const Workspace& ws, int l, std::vector<int32_t>* record) {
    TokenDispatcher& dispatcher =
        parallel_.dispatcher(dev_, ws.generation, ws.N,
                             ws.layers[static_cast<size_t>(l)].moe.xg.dtype, routing_.moe_layers());
    MoePass p;
    p.layer = l;
    p.moe_layer = routing_.row(l);
    p.N = ws.N;
    p.ids = ws.ids;
    p.stats = &parallel_.routing_stats(routing_.over_ranks());
    p.dispatcher = &dispatcher;
    p.record = record;
    p.route = routing_.layer_routing(ws, l);
    return p;
}

void ModelPasses::forward_layers(Workspace& ws, const std::vector<KvSlot>* cache) {
    const int L = cfg_.n_layers;
    embedding_fwd(dev_, store_.wf, ws, L > 0 ? ws.layers[0].x_in : ws.x_final);
    for (int l = 0; l < L; ++l) {
        const LayerActs& a = ws.layers[static_cast<size_t>(l)];
        attention_part(ws, l, cache ? &(*cache)[static_cast<size_t>(l)] : nullptr);
        const Tensor& x_out = l + 1 < L ? ws.layers[static_cast<size_t>(l) + 1].x_in : ws.x_final;
        if (!same_view(x_out, a.x_mid)) dev_.copy(x_out, a.x_mid);
        ffn_part(ws, l, x_out, micro.view(1, {2}), record_routing);
        routing_.record_load(ws, l);
    }
}

void ModelPasses::attention_part(Workspace& ws, int l, const KvSlot* cache) {
    const LayerActs& a = ws.layers[static_cast<size_t>(l)];
    const LayerW& lw = store_.wf.layers[static_cast<size_t>(l)];
    norm_fwd(dev_, cfg_, lw.attn_norm, a.x_in, a.n1, ws.N);
    if (!same_view(a.x_mid, a.x_in)) dev_.copy(a.x_mid, a.x_in);
    attention_fwd(dev_, cfg_, lw.attn, a.n1.y, a.attn, a.x_mid, ws.B, ws.T, cache,
                  attention_compute());
    norm_fwd(dev_, cfg_, lw.ffn_norm, a.x_mid, a.n2, ws.N);
}

void ModelPasses::ffn_part(Workspace& ws, int l, const Tensor& x_out, const Tensor& aux_stats,
                           std::vector<int32_t>* routing) {
    LayerActs& a = ws.layers[static_cast<size_t>(l)];
    const LayerW& lw = store_.wf.layers[static_cast<size_t>(l)];
    if (lw.moe) {
        // The gather of the expert rows reads f32: a 16-bit n2.y (hash routing) is widened
        // into its transient, exactly (the products round the gathered rows to it anyway).
        if (a.n2.y32) dev_.convert(a.n2.y32.view(0, {ws.N, cfg_.d_model}), a.n2.y);
        const Tensor& xn = a.n2.y32 ? a.n2.y32 : a.n2.y;
        // The recompute (no aux_stats) needs no global statistics, but the expert-parallel
        // dispatch of the rows.
        moe_fwd(dev_, cfg_, lw, xn, a.moe, x_out, aux_stats, moe_pass(ws, l, routing));
    } else
        ffn_fwd(dev_, cfg_.ffn, lw.ffn, FfnRows::dense(ws.N), a.n2.y, a.ffn, x_out, 1.0f);
}

void ModelPasses::recompute_layer(Workspace& ws, int l) {
    // The same deterministic ops on the same inputs as the forward: bit-identical activations.
    // The residual stream, the loss terms, the routing record and the expert loads (recorded
    // by the forward) are left alone.
    if (ws.recompute == Recompute::block) attention_part(ws, l, nullptr);
    ffn_part(ws, l, Tensor{}, Tensor{}, nullptr);
}

void ModelPasses::backward_layers(Workspace& ws, float grad_scale) {
    const int64_t N = ws.N;
    const GradScratch& g = ws.g;  // g.dres holds d loss / d x_final (from the head)
    for (int l = cfg_.n_layers - 1; l >= 0; --l) {
        if (ws.recomputes(l, cfg_.n_layers)) recompute_layer(ws, l);
        const LayerActs& a = ws.layers[static_cast<size_t>(l)];
        const LayerW& lw = store_.wf.layers[static_cast<size_t>(l)];
        const LayerW& glw = store_.gw.layers[static_cast<size_t>(l)];
        if (lw.moe)
            moe_bwd(dev_, cfg_, lw, glw, a.n2.y, a.moe, g.dres, g, g.dxn, grad_scale,
                    moe_pass(ws, l, nullptr));
        else
            ffn_bwd(dev_, cfg_.ffn, lw.ffn, glw.ffn, FfnRows::dense(N), a.n2.y, a.ffn, g.dres, g,
                    g.dxn, false);
        norm_bwd(dev_, cfg_, lw.ffn_norm, glw.ffn_norm, g.dxn, a.x_mid, a.n2, g.dres, N, true);
        attention_bwd(dev_, cfg_, lw.attn, glw.attn, a.n1.y, a.attn, g.dres, g, g.dxn, ws.B, ws.T,
                      attention_compute());
        norm_bwd(dev_, cfg_, lw.attn_norm, glw.attn_norm, g.dxn, a.x_in, a.n1, g.dres, N, true);
        if (layer_grads_ready) layer_grads_ready(l);
    }
    embedding_bwd(dev_, store_.gw, ws, g.dres);
}

}  // namespace moetrain
