// Analytic training cost (model.h): 6 FLOPs per active matmul parameter per token (forward
// 2, backward 4) plus the attention score/value products 12 * L * T * H * h per token
// (nanoGPT / PaLM convention, full T x T without causal halving). docs/MODEL_NOTES.md.
#include "model/param_layout.h"

namespace moetrain {

double ModelCost::train_flops_per_token(int T) const {
    return 6.0 * static_cast<double>(active_matmul_params) +
           12.0 * static_cast<double>(n_layers) * T * static_cast<double>(d_attn);
}

ModelCost model_cost(const ModelConfig& c) {
    ModelCost mc;
    for (const auto& p : build_param_layout(c)) mc.total_params += p.numel();
    const int64_t D = c.d_model, F = c.d_ff, h = c.head_dim;
    const int64_t qdim = int64_t{c.n_heads} * h, kvdim = int64_t{c.n_kv_heads} * h;
    const int64_t mats = c.ffn == FfnKind::swiglu ? 3 : 2;  // matrices per FFN
    int64_t active = int64_t{c.vocab_size} * D;             // lm_head (tied or not)
    for (int l = 0; l < c.n_layers; ++l) {
        active += 2 * qdim * D + 2 * kvdim * D;  // wq, wo, wk, wv
        if (!c.is_moe_layer(l)) {
            active += mats * D * F;
            continue;
        }
        const MoeConfig& m = *c.moe;
        if (m.topk_router()) active += int64_t{m.n_experts} * D;
        active += m.active_k() * mats * D * F + m.n_shared_experts * mats * D * F;
    }
    mc.active_matmul_params = active;
    mc.n_layers = c.n_layers;
    mc.d_attn = qdim;
    return mc;
}

}  // namespace moetrain
