// DecodePasses: generation's view of ModelImpl (decode_passes.h).
#include "model/decode_passes.h"

#include "model/model_access.h"
#include "model/model_impl.h"

namespace moetrain {

DecodePasses::DecodePasses(Model& model) : im_(ModelAccess::impl(model)) {}

void DecodePasses::prefill(const int32_t* x, int B, int T, int64_t pos0,
                           const std::vector<KvSlot>& cache, const Tensor& logits) {
    im_.passes.forward_cached(x, B, T, pos0, cache, logits);
}

void DecodePasses::decode_step(const int32_t* x, int B, int64_t pos,
                               const std::vector<KvSlot>& cache, const Tensor& logits,
                               const std::string& key, const std::function<void()>& then) {
    im_.passes.decode_step(x, B, pos, cache, logits, key, then);
}

}  // namespace moetrain
