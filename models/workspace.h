// Activation and scratch buffers of one forward(/backward) shape (B, T), planned once and
// reused by every step of that shape: nothing is allocated inside a step after the first.
// Training workspaces keep the activations the backward pass reads: every layer's (Recompute
// none), only every layer's input plus one shared set of layer buffers (block), or every
// layer's attention part plus one shared set of FFN / MoE buffers (ffn). Inference
// workspaces share one set of layer buffers between all layers and update the residual
// stream in place.
#pragma once

#include <memory>
#include <vector>

#include "moetrain/config.h"
#include "moetrain/device.h"
#include "moetrain/model.h"

namespace moetrain {

struct NormActs {
    Tensor y, mean, rstd;  // y [N, D]; mean (layernorm only), rstd [N]
};

struct AttnActs {
    Tensor q, k, v, o, lse;  // q, o [N, H*h]; k, v [N, K*h] (after RoPE); lse [B, H, T]
};

struct FfnActs {
    Tensor gate, up, h;  // [rows, F]: pre-activations (gate: swiglu only) and the hidden h
};

struct MoeActs {
    Tensor logits, probs, lse;         // router [N, E], [N, E], [N] (softmax_topk)
    Tensor topk_idx, topk_w;           // [N, k] i32, f32 (topk_w unused by hash routing)
    Tensor counts;                     // [E] i32
    Tensor row_token, slot_row;        // [N*k] i32 (Device::moe_sort)
    Tensor xg, yrows;                  // expert input / output rows [N*k, D], sorted by expert
    FfnActs experts;                   // [N*k, F]
    FfnActs shared;                    // [N, S*F]
};

struct LayerActs {
    Tensor x_in, x_mid;  // residual stream entering attention / entering the FFN [N, D]
    NormActs n1, n2;
    AttnActs attn;
    FfnActs ffn;  // dense layer
    MoeActs moe;  // MoE layer
};

// Backward scratch shared by all layers (training only).
struct GradScratch {
    Tensor dres;             // d loss / d residual stream [N, D]
    Tensor dxn;              // d loss / d norm output [N, D]
    Tensor dq, dk, dv, d_o;  // like q, k, v, o
    Tensor dgate, dup, dh;   // FFN hidden gradients, sized for the widest FFN use
    Tensor drows, dxg;       // MoE expert row gradients [N*k, D]
    Tensor dw;               // d loss / d topk_w [N, k]
    Tensor dlogits;          // d loss / d router logits [N, E]
};

struct Workspace {
    int B = 0, T = 0;
    int64_t N = 0;  // B*T rows
    bool training = false;
    Recompute recompute = Recompute::none;  // what the backward recomputes (training only)
    int64_t bytes = 0;                      // device bytes of every buffer planned below
    Tensor ids, targets, pos_ids;  // i32 [N]
    std::vector<LayerActs> layers;
    Tensor x_final;  // residual stream after the last layer [N, D]
    NormActs nf;     // final norm
    Tensor logits;   // one chunk of logits [logit_rows, V]
    int64_t logit_rows = 0;
    Tensor losses;  // per-token cross-entropy [N]
    GradScratch g;
    // Layers whose dropped activations the backward must recompute: all but the last (the
    // shared buffers still hold the last layer's forward), none without recompute.
    bool recomputes(int layer, int n_layers) const {
        return training && recompute != Recompute::none && layer + 1 < n_layers;
    }
};

// Default bound on the logits buffer (elements): 16M floats.
constexpr int64_t kLogitBudget = int64_t{1} << 24;

// Rows of logits computed at once so that rows * V <= budget (at least one row).
int64_t logit_chunk_rows(int64_t N, int64_t V, int64_t budget);

std::unique_ptr<Workspace> plan_workspace(Device& dev, const ModelConfig& c, int B, int T,
                                          bool training, int64_t logit_budget,
                                          Recompute recompute);

}  // namespace moetrain
