// The parameter layout of MODEL.md section 6: every tensor with its exact name and shape in
// one flat f32 buffer (decayed rank >= 2 tensors first, then gains and biases), and the typed
// per-layer views the layer code works with. The same layout serves the parameter, gradient
// and optimizer-moment buffers: bind_params() turns any flat buffer into views.
#pragma once

#include <string>
#include <vector>

#include "moetrain/config.h"
#include "moetrain/model.h"

namespace moetrain {

// A linear layer y = x @ w^T (+ b): w [out, in], b [out] or empty.
struct LinearW {
    Tensor w, b;
    int64_t out = 0, in = 0;
};

// Norm gains and (layernorm with bias only) biases, [dim].
struct NormW {
    Tensor g, b;
};

// One dense FFN (G = 1) or a stack of G experts of the same shape: w_gate/w_up [G, F, D],
// w_down [G, D, F]; w_gate empty unless swiglu; biases only for the dense FFN (G = 1).
struct FfnW {
    Tensor w_gate, w_up, w_down, b_gate, b_up, b_down;
    int64_t G = 0, F = 0, D = 0;
    bool present() const { return G > 0; }
};

struct AttnW {
    LinearW wq, wk, wv, wo;
};

struct LayerW {
    NormW attn_norm, ffn_norm;
    AttnW attn;
    bool moe = false;
    FfnW ffn;       // dense layer
    Tensor router;  // [E, D], softmax_topk MoE layer
    FfnW experts;   // [E, ...], MoE layer
    FfnW shared;    // G = 1, width S*F; absent when n_shared_experts = 0
};

struct ModelW {
    Tensor tok_emb, pos_emb;  // pos_emb empty unless pos = learned
    std::vector<LayerW> layers;
    NormW norm_f;
    Tensor lm_head;  // the tok_emb tensor itself when tie_embeddings
};

// Which experts of every MoE layer a flat buffer holds: all of them (parts = 1), or under
// expert parallelism (docs/DISTRIBUTED.md) the `index`-th of `parts` equal blocks, experts
// [index E / parts, (index + 1) E / parts): the expert tensors are then [E / parts, ...] with
// the same names, and everything else is as in the whole layout.
struct ExpertShard {
    int parts = 1, index = 0;
    bool whole() const { return parts == 1; }
    bool operator==(const ExpertShard&) const = default;
};

// Every parameter tensor with its offset; decayed tensors first, each group in MODEL.md order.
std::vector<ParamInfo> build_param_layout(const ModelConfig& c, const ExpertShard& shard = {});
// Number of leading elements that belong to decayed (rank >= 2) tensors.
int64_t decayed_numel(const std::vector<ParamInfo>& layout);
// Views of `flat` (laid out by `layout`) for the layer code; an expert stack's G is the number
// of experts the layout holds.
ModelW bind_params(const ModelConfig& c, const std::vector<ParamInfo>& layout, const Tensor& flat);
// `w` with every matrix that feeds a matrix product through linear layers or the head
// (attention, dense FFN, experts, shared experts, lm_head) replaced by the view at the same
// element offset of `lo`, a 16-bit copy of the leading decayed range of the flat buffer
// `w` was bound to. The embedding tables (looked up, not multiplied), the router (kept in
// fp32, MODEL.md) and all gains and biases stay `w`'s fp32 views.
ModelW with_compute_matrices(const ModelW& w, const Tensor& lo);

}  // namespace moetrain
