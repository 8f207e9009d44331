// Analytic memory of a training step and of a decode step (bench_memory.h).
#include "bench_memory.h"

namespace moetrain::cli {
namespace {

constexpr double kF32 = 4.0;

// Floats the backward needs of one FFN over `rows` rows of width F: the pre-activations
// (gate and up for swiglu, up otherwise) and the hidden h that feeds the down projection.
double ffn_saved(const ModelConfig& c, double rows, double F) {
    return rows * F * (c.ffn == FfnKind::swiglu ? 3.0 : 2.0);
}

}  // namespace

MemoryNeed training_memory(const ModelConfig& c, int64_t params, int64_t B, int64_t T,
                           Recompute recompute) {
    MemoryNeed m;
    const double P = static_cast<double>(params);
    m.weights = P * kF32;
    m.grads = P * kF32;
    m.moments = 2.0 * P * kF32;
    const double N = static_cast<double>(B) * static_cast<double>(T), D = c.d_model;
    const double q = static_cast<double>(c.n_heads) * c.head_dim;
    const double kv = static_cast<double>(c.n_kv_heads) * c.head_dim;
    const double norm_stats = c.norm == NormKind::layernorm ? 2.0 : 1.0;  // mean, rstd per row
    // The residual stream into the FFN, both norm outputs and their row statistics; q, o
    // [N, H h]; k, v [N, K h] (after RoPE); lse [N, H].
    const double attention =
        N * (3.0 * D + 2.0 * norm_stats) + N * (2.0 * q + 2.0 * kv + c.n_heads);
    const double dense = ffn_saved(c, N, c.d_ff);
    double moe = 0;
    if (c.moe) {
        const MoeConfig& e = *c.moe;
        const double k = e.active_k(), E = e.n_experts;
        if (e.topk_router()) moe += N * (2.0 * E + 1.0 + k);  // logits, probs, lse, weights
        moe += N * k * 3.0;  // chosen experts, sorted token of each row, row of each slot
        if (e.capacity_factor > 0) moe += N * k + k * E;  // admitted selections, rank offsets
        moe += 2.0 * N * k * D;  // gathered expert inputs and outputs (combine weights' gradient)
        moe += ffn_saved(c, N * k, c.d_ff);  // routed experts
        moe += ffn_saved(c, N, static_cast<double>(e.n_shared_experts) * c.d_ff);
    }
    bool any_dense = false, any_moe = false;
    for (int l = 0; l < c.n_layers; ++l) (c.is_moe_layer(l) ? any_moe : any_dense) = true;
    const double shared_ffn = (any_dense ? dense : 0.0) + (any_moe ? moe : 0.0);

    double floats = 0;
    for (int l = 0; l < c.n_layers; ++l) {
        floats += N * D;  // the layer's input (residual stream into the attention norm)
        if (recompute != Recompute::block) floats += attention;
        if (recompute == Recompute::none) floats += c.is_moe_layer(l) ? moe : dense;
    }
    // The buffers all layers share and the backward recomputes into.
    if (recompute == Recompute::block && c.n_layers > 0) floats += attention;
    if (recompute != Recompute::none && c.n_layers > 0) floats += shared_ffn;
    floats += N * (2.0 * D + norm_stats);  // final residual and final norm
    m.activations = floats * kF32;
    return m;
}

double decode_weight_bytes(const ModelConfig& c, int64_t active_matmul_params) {
    const double norms = (2.0 * c.n_layers + 1.0) * c.d_model;  // gains (biases are as small)
    return (static_cast<double>(active_matmul_params) + norms + c.d_model) * kF32;
}

}  // namespace moetrain::cli
