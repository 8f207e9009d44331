// The activations and scratch buffers the layer code (layers.h) reads and writes: one struct
// per layer type, and the Workspace of one forward(/backward) shape (B, T) holding them for
// every layer, planned once and reused by every step of that shape (model/workspace.h plans
// it): nothing is allocated inside a step after the first.
// Training workspaces keep the activations the backward pass reads: every layer's (Recompute
// none), only every layer's input plus one shared set of layer buffers (block), or every
// layer's attention part plus one shared set of FFN / MoE buffers (ffn). Inference
// workspaces share one set of layer buffers between all layers and update the residual
// stream in place.
// Mixed precision (bf16 / fp16 training workspaces): the activations whose only readers are
// matrix products (norm outputs feeding projections, expert input rows, FFN hiddens) are
// stored in the 16-bit compute dtype — the products round their operands to it anyway, so
// the results are bit-identical to fp32 storage. The norm and activation ops write them in 16
// bits directly; a hash-routed MoE layer widens its 16-bit FFN-norm output into a shared f32
// buffer for the expert-row gather (`y32`, see workspace_storage16.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "moetrain/model.h"  // Recompute
#include "moetrain/tensor.h"

namespace moetrain {

struct NormActs {
    Tensor y, mean, rstd;  // y [N, D]; mean (layernorm only), rstd [N]
    Tensor y32;  // a hash-routed MoE layer's 16-bit n2.y: the shared f32 buffer it is widened
                 // into for the expert-row gather; else empty
};

struct AttnActs {
    Tensor q, k, v, o, lse;  // q, o [N, H*h]; k, v [N, K*h] (after RoPE); lse [B, H, T]
};

struct FfnActs {
    Tensor gate, up, h;  // [rows, F]: pre-activations (gate: swiglu only) and the hidden h
    // A dense GELU FFN's GELU runs in the up projection's epilogue (h f32): inference and fp32
    // training. Training under 16-bit products runs act_fwd after a BIAS product instead, in
    // both storage modes (h 16-bit or f32: the same ops, so bit-identical results).
    bool fuse_gelu = true;
};

struct MoeActs {
    Tensor logits, probs, lse;   // router [N, E], [N, E] (p or s), [N] (top-k routers)
    Tensor topk_idx, topk_w;     // [N, k] i32, f32 (topk_w unused by hash routing)
    Tensor counts;               // [E] i32, the rows each expert computes (after dropping)
    Tensor kept_idx, chosen;     // capacity (training): [N, k] i32 admitted selections (-1 =
                                 // dropped), [E] i32 selections before dropping
    Tensor offsets;              // capacity (training): [k, E] i32 higher-priority selections
                                 // of the other ranks (data parallel; kept for the recompute)
    Tensor row_token, slot_row;  // [N*k] i32 (Device::moe_sort)
    Tensor xg, yrows;            // expert input / output rows [N*k, D], sorted by expert
                                 // (a 16-bit xg is gathered into yrows first)
    FfnActs experts;             // [N*k, F]
    FfnActs shared;              // [N, S*F]
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
    // Under 16-bit products: an f32 gradient rounded once for both gradient products of a
    // linear layer (round_dy_once), [N, widest dense linear output]; a dense GELU / ReLU FFN's
    // act_bwd writes the up projection's dy there directly; else empty.
    Tensor dy16;
};

struct Workspace {
    uint64_t generation = 0;  // next_buffer_generation() when planned
    int B = 0, T = 0;
    int64_t N = 0;  // B*T rows
    bool training = false;
    Recompute recompute = Recompute::none;  // what the backward recomputes (training only)
    DType stored16 = DType::f32;            // dtype of the GEMM-only activations (f32: all fp32)
    DType grads16 = DType::f32;    // training: the products' 16-bit dtype for dy16 / dlogits16
    int64_t bytes = 0;             // device bytes of every buffer planned below
    Tensor ids, targets, pos_ids;  // i32 [N]
    std::vector<LayerActs> layers;
    Tensor x_final;  // residual stream after the last layer [N, D]
    NormActs nf;     // final norm (y f32: also where a hash-routed layer widens its 16-bit n2.y)
    Tensor logits;   // one chunk of logits [logit_rows, V]
    // Training with 16-bit products (grads16): the chunk's logits gradient rounded once, read by
    // both of the head's gradient products [logit_rows, V] (else empty: they read `logits`).
    Tensor dlogits16;
    int64_t logit_rows = 0;
    Tensor losses;  // per-token cross-entropy [N]
    GradScratch g;
    // Layers whose dropped activations the backward must recompute: all but the last (the
    // shared buffers still hold the last layer's forward), none without recompute.
    bool recomputes(int layer, int n_layers) const {
        return training && recompute != Recompute::none && layer + 1 < n_layers;
    }
};

}  // namespace moetrain
