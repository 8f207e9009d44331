// An independent float64 implementation of the MODEL.md transformer for tests: plain loops over
// std::vector<double>, weights by MODEL.md section 6 name, no code shared with models/ or the
// backends (its own RoPE, attention, routing, mix32 and loss). Computes the loss terms of one
// batch, and optionally the logits.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "moetrain/config.h"
#include "moetrain/model.h"

namespace moetrain::refmodel {

using Weights = std::map<std::string, std::vector<double>>;

struct Loss {
    double ce = 0, aux = 0, z = 0, loss = 0;
};

// Loss of token ids x [B*T] with targets y [B*T] (-1 ignored); logits [B*T, V] when asked.
// The expert biases are read from w ("layers.{l}.moe.router.expert_bias") when the config has
// them. training: the batch is a training micro-batch, so moe.capacity_factor drops
// selections (MODEL.md 2); otherwise every pass is dropless. dropped (when given) receives the
// number of dropped selections over all MoE layers.
Loss loss(const ModelConfig& c, const Weights& w, const std::vector<int32_t>& x,
          const std::vector<int32_t>& y, int B, int T, std::vector<double>* logits = nullptr,
          bool training = false, int64_t* dropped = nullptr);

// MODEL.md 2 hash routing: mix32(token + 0x9E3779B9 * (layer + 1)) mod E.
uint32_t mix32(uint32_t z);
int hash_expert(int token, int layer, int n_experts);

// softmax_topk / sigmoid_topk routing of one logit row: the scores (p or s), the chosen
// experts (descending score + bias, ties lower index; bias empty = 0) and their weights
// (scores, renormalised when norm_topk, times routed_scaling).
void route_topk(const MoeConfig& m, const std::vector<double>& logits,
                const std::vector<double>& bias, std::vector<double>& score, std::vector<int>& idx,
                std::vector<double>& w);

// ---- test glue (public API types only) ----
// Weights by name from a flat parameter vector laid out as `params`.
Weights weights_from(const std::vector<ParamInfo>& params, const std::vector<float>& flat);
// A small config for model tests: V 32, D 16, 2 layers, 4 heads of 4, 2 kv heads, F 24,
// max_seq_len 16, rmsnorm, rope, swiglu, untied, dense.
ModelConfig small_config();
// Adds an MoE block (E experts, top-k softmax routing, MoE from layer first_layer).
ModelConfig with_moe(ModelConfig c, int n_experts, int top_k, int first_layer = 0);

// Model::init_weights(seed), then weights x5 (std ~0.1), gains 1 + 0.2 n, biases 0.2 n, so
// that every term (biases, gains, routing) carries signal in tests.
void randomize_weights(Model& m, uint64_t seed);

struct Batch {
    std::vector<int32_t> x, y;
};
// Random ids in [0, V); every `ignore_every`-th target is -1 (0 = none).
Batch random_batch(int vocab, int B, int T, uint64_t seed, int ignore_every = 0);

}  // namespace moetrain::refmodel
