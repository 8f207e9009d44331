// What generation (models/generate/generate.cpp) needs from a Model beyond its public API: the
// prefill over the prompt and the recorded decode step, both over a per-layer KV cache.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layers/layers.h"  // KvSlot
#include "moetrain/model.h"

namespace moetrain {

class DecodePasses {
  public:
    explicit DecodePasses(Model& model);

    // Forward over T tokens per row at positions pos0.. filling the cache, then the logits
    // [B, V] of each row's last position (runs eagerly).
    void prefill(const int32_t* x, int B, int T, int64_t pos0, const std::vector<KvSlot>& cache,
                 const Tensor& logits);
    // One token per row at position pos, then the logits [B, V] and `then` (the sampler), as one
    // recorded step keyed by `key` (ModelPasses::decode_step says what the key must name).
    void decode_step(const int32_t* x, int B, int64_t pos, const std::vector<KvSlot>& cache,
                     const Tensor& logits, const std::string& key,
                     const std::function<void()>& then);

  private:
    ModelImpl& im_;
};

}  // namespace moetrain
