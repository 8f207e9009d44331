// The parameter layout of MODEL.md section 6: every tensor with its exact name and shape in
// one flat f32 buffer (decayed rank >= 2 tensors first, then gains and biases), and its binding
// to the typed per-layer views the layer code works with (layers/layer_weights.h). The same
// layout serves the parameter, gradient and optimizer-moment buffers: bind_params() turns any
// flat buffer into views.
#pragma once

#include <string>
#include <vector>

#include "layers/layer_weights.h"
#include "moetrain/config.h"
#include "moetrain/model.h"

namespace moetrain {

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
// Number of elements of every tensor of the layout.
int64_t layout_numel(const std::vector<ParamInfo>& layout);
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
