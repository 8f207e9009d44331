// The weights of the layers as the layer code (layers.h) reads them: typed views into a flat
// buffer, one struct per layer type. model/param_layout.h binds them to the parameter layout
// (bind_params); the same structs view the gradient buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "moetrain/tensor.h"

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

}  // namespace moetrain
