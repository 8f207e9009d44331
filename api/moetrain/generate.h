// Autoregressive generation (MODEL.md 7) with a per-layer KV cache: the prompt is run once
// (prefill), then one token per step attends over the cached keys/values at its absolute
// position (no recomputation of the prefix). Sampling (greedy, temperature, top-k, top-p,
// seeded Philox draws) runs on the device.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "moetrain/model.h"

namespace moetrain {

struct GenerateOptions {
    int max_new_tokens = 64;
    float temperature = 1.0f;  // 0 = greedy (argmax, ties to the lower id)
    int64_t top_k = 0;         // 0 = off
    float top_p = 1.0f;        // 1 = off
    uint64_t seed = 0;         // Philox key; the counter is (index of the generated token, row)
};

// Called once per generation step with the step index (0-based) and the new token of every
// row; returning false stops generation after this step.
using TokenCallback = std::function<bool(int64_t index, std::span<const int32_t> tokens)>;

// Generates for B prompts of equal length (at least one token each); returns the new tokens
// of every row (without the prompt). Throws when prompt length + max_new_tokens exceeds
// max_seq_len, on token ids outside the vocabulary and on invalid sampling options.
std::vector<std::vector<int32_t>> generate_batch(Model& model,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 const GenerateOptions& opts,
                                                 const TokenCallback& on_step = {});

// One prompt; on_token is called with each new token (return false to stop).
std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& opts,
                              const std::function<bool(int32_t token)>& on_token = {});

}  // namespace moetrain
