// The layer functions of the MODEL.md transformer, one file per layer type with forward and
// backward side by side (linear.cpp, embedding.cpp, norm.cpp, attention.cpp, ffn.cpp,
// moe.cpp, head.cpp). Backward functions ADD weight gradients into the gradient views
// (`gw`: the same layout bound to the gradient buffer); "dx" outputs are overwritten unless
// accumulate_dx. Gradient scaling (1/tokens, 1/A) is carried by the incoming gradients.
#pragma once

#include <vector>

#include "layers/moe_parallel.h"
#include "layers/layer_weights.h"
#include "layers/layer_acts.h"

namespace moetrain {

// ---- linear.cpp: y = x @ w^T (+ b) over `rows` rows ----
// beta = 0 overwrites y, beta = 1 accumulates into it.
void linear_fwd(Device& dev, const Tensor& y, const Tensor& x, const LinearW& w, int64_t rows,
                float beta);
// dx (=|+=) dy @ w (skipped when dx is empty); gw.w += dy^T @ x; gw.b += colsum(dy). dy16: the
// workspace's 16-bit gradient scratch (GradScratch::dy16, may be empty), see round_dy_once.
void linear_bwd(Device& dev, const Tensor& dx, const LinearW& gw, const Tensor& dy, const Tensor& x,
                const LinearW& w, int64_t rows, bool accumulate_dx, const Tensor& dy16 = {});
// The dy both gradient products of w read: under 16-bit products an f32 dy is rounded once into
// dy16 (when given: at least rows * w.out elements of w's dtype) instead of by each product;
// otherwise dy itself. The products' bits are the same either way (they round dy anyway); a
// bias gradient then sums the rounded dy on every backend (cpu / opencl summed the f32 dy).
Tensor round_dy_once(Device& dev, const Tensor& dy, const Tensor& dy16, const LinearW& w,
                     int64_t rows);
// Whether w's gradients are read from dy16: w runs 16-bit products and dy16 (non-empty) is of
// their dtype (round_dy_once's rule; a dense FFN's act_bwd writes the up projection's dy there).
bool reads_dy16(const Tensor& dy16, const LinearW& w);
// The three products of a linear layer over `rows` rows as GemmArgs (biases not included):
// y = x @ w^T (+ beta y), dx = dy @ w (+ dx), gw.w += dy^T @ x. The grouped MoE experts run
// the same products with one weight per row group (ffn.cpp, Device::gemm_grouped).
GemmArgs linear_fwd_gemm(const Tensor& y, const Tensor& x, const LinearW& w, int64_t rows,
                         float beta);
GemmArgs linear_dx_gemm(const Tensor& dx, const Tensor& dy, const LinearW& w, int64_t rows,
                        bool accumulate_dx);
GemmArgs linear_dw_gemm(const LinearW& gw, const Tensor& dy, const Tensor& x, const LinearW& w,
                        int64_t rows);

// ---- embedding.cpp: x = tok_emb[ids] (+ pos_emb[pos_ids]) ----
void embedding_fwd(Device& dev, const ModelW& w, const Workspace& ws, const Tensor& x);
void embedding_bwd(Device& dev, const ModelW& gw, const Workspace& ws, const Tensor& dx);

// ---- norm.cpp: rmsnorm / layernorm over rows of d_model ----
void norm_fwd(Device& dev, const ModelConfig& c, const NormW& w, const Tensor& x, const NormActs& a,
              int64_t rows);
void norm_bwd(Device& dev, const ModelConfig& c, const NormW& w, const NormW& gw, const Tensor& dy,
              const Tensor& x, const NormActs& a, const Tensor& dx, int64_t rows,
              bool accumulate_dx);

// ---- attention.cpp ----
// Where keys and values live: the layer's own k/v (training, S = T, pos0 = 0) or a KV cache
// [B, S, K, h] the new rows are written into at positions p .. p + T - 1, p = pos0 +
// pos_dev[0]. pos_dev (i32 [1] in device memory, or empty = 0) lets a decode step read its
// position on the device, so its recorded work (Device::run_recorded) is the same at every
// position: RoPE, the cache rows written and the attention length all add it.
struct KvSlot {
    Tensor k, v;
    int64_t S = 0, pos0 = 0;
    Tensor pos_dev;
};
// x_res += Wo(attention(xn)) (+ bo). `compute`: the attention precision (AttnDims::compute).
void attention_fwd(Device& dev, const ModelConfig& c, const AttnW& w, const Tensor& xn,
                   const AttnActs& a, const Tensor& x_res, int B, int T, const KvSlot* cache,
                   DType compute);
// From dres = d loss / d attention output: weight gradients and dxn (overwritten).
void attention_bwd(Device& dev, const ModelConfig& c, const AttnW& w, const AttnW& gw,
                   const Tensor& xn, const AttnActs& a, const Tensor& dres, const GradScratch& g,
                   const Tensor& dxn, int B, int T, DType compute);

// ---- ffn.cpp: a dense FFN (one group) or G experts over contiguous row groups ----
// The rows an FFN runs over: `rows` rows of one dense FFN (counts empty; biases allowed), or
// the `groups` MoE experts, group g owning counts[g] consecutive rows, where counts is an i32
// device tensor whose sum is `rows` (read on the device only: Device::gemm_grouped).
struct FfnRows {
    int64_t rows = 0;
    Tensor counts;
    int64_t groups = 1;
    static FfnRows dense(int64_t rows) { return {rows, Tensor{}, 1}; }
    static FfnRows experts(int64_t rows, const Tensor& counts, int64_t groups) {
        return {rows, counts, groups};
    }
};
// y (=|+=) FFN(x) over the rows of x, acts and y. With y empty only the activations the
// backward reads are computed (recompute, no down projection).
void ffn_fwd(Device& dev, FfnKind kind, const FfnW& w, const FfnRows& rows, const Tensor& x,
             const FfnActs& a, const Tensor& y, float beta_y);
void ffn_bwd(Device& dev, FfnKind kind, const FfnW& w, const FfnW& gw, const FfnRows& rows,
             const Tensor& x, const FfnActs& a, const Tensor& dy, const GradScratch& g,
             const Tensor& dx, bool accumulate_dx);

// ---- moe.cpp: route -> dispatch -> grouped expert FFN -> combine (+ shared experts) ----
// The routing state of one MoE layer's pass beyond its weights (MODEL.md 2): the expert bias
// the top-k selection adds ([E] f32, empty = none); the per-expert capacity (-1 = dropless:
// every pass but a training micro-batch of a model with moe.capacity_factor); the i32 [E]
// accumulator of the optimizer step's selections before dropping, which the forward of a
// training micro-batch adds its counts to when the model has an expert bias (empty = none);
// and the layer's buffers for the statistics over the micro-batch (RoutingStats): `offsets`
// ([k, E] i32, the admission offsets of a data-parallel capacity) and `counts` ([E] i32, the
// selections over every rank; the model's load row).
struct MoeRouting {
    Tensor bias;
    int64_t capacity = -1;
    Tensor step_counts;
    Tensor offsets, counts;
};
// One MoE layer's pass: which layer (`layer` for hash routing, `moe_layer` its index among the
// MoE layers for the dispatcher), its N tokens and their ids, its routing state, and the
// parallel context's two parts (moe_parallel.h). When `record` is given, the chosen experts
// are appended to it (gradient checks watch for flips).
struct MoePass {
    int layer = 0, moe_layer = 0;
    int64_t N = 0;
    Tensor ids;
    MoeRouting route;
    RoutingStats* stats = nullptr;
    TokenDispatcher* dispatcher = nullptr;
    std::vector<int32_t>* record = nullptr;
};
// The router options of the config as the router ops take them.
RouterArgs router_args(const MoeConfig& m);
// x_res += MoE(xn); aux/z loss terms are added to aux_stats[0], aux_stats[1]. The backward's
// recompute passes x_res and aux_stats empty: every activation moe_bwd reads is produced
// (expert output rows included), nothing is combined, no loss term is added and no routing
// statistic exchanged. Expert parallel, w holds this rank's experts only.
void moe_fwd(Device& dev, const ModelConfig& c, const LayerW& w, const Tensor& xn, MoeActs& a,
             const Tensor& x_res, const Tensor& aux_stats, const MoePass& p);
// From dres = d loss / d MoE output: weight gradients and dxn (overwritten). grad_scale
// scales the aux / z loss gradients (the micro-batch weight); `p` is the forward's.
void moe_bwd(Device& dev, const ModelConfig& c, const LayerW& w, const LayerW& gw, const Tensor& xn,
             const MoeActs& a, const Tensor& dres, const GradScratch& g, const Tensor& dxn,
             float grad_scale, const MoePass& p);

// ---- head.cpp: final norm, logits (row chunks), cross-entropy ----
// Per-token losses into ws.losses and ce_out[0] += ce_scale * sum(losses). With gw given,
// also the head backward (grad_scale per token already divided by the token count): weight
// gradients and ws.g.dres = d loss / d x_final.
void head_fwd(Device& dev, const ModelConfig& c, const ModelW& w, const ModelW* gw, Workspace& ws,
              float ce_scale, float grad_scale, const Tensor& ce_out);
// Logits of every row, downloaded chunk by chunk ([N, V] row-major).
std::vector<float> head_logits(Device& dev, const ModelConfig& c, const ModelW& w, Workspace& ws);
// logits [B, V] of the last position of each row (after the final norm in ws.nf).
void head_last_logits(Device& dev, const ModelConfig& c, const ModelW& w, const Workspace& ws,
                      const Tensor& logits);

}  // namespace moetrain
