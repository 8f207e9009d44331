// ParamStore: a Model's parameters on its device. The flat parameter and gradient buffers laid
// out by MODEL.md 6 (param_layout.h), the index of the tensor names, the typed views the passes
// read, and under mixed precision the 16-bit working copy of the matrices. Expert parallel, the
// buffers hold one rank's block of experts (ExpertShard).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/param_layout.h"
#include "moetrain/precision.h"

namespace moetrain {

// Host-side seeded initial values of every parameter, laid out like the flat buffer.
std::vector<float> init_values(const ModelConfig& c, const std::vector<ParamInfo>& layout,
                               uint64_t seed);

class ParamStore {
  public:
    ParamStore(Device& dev, const ModelConfig& cfg);

    std::vector<ParamInfo> layout;
    std::map<std::string, size_t> index;  // name -> position in layout
    int64_t n_params = 0, n_decay = 0;    // all elements; leading decayed elements
    Tensor params, grads;
    ModelW w, gw;  // views of params / grads
    // Mixed precision: `params_lo` is the 16-bit working copy of the decayed (matrix) range
    // of `params`, refreshed from the fp32 master values before a forward pass whenever they
    // changed (params_version); `wf` are the weights the passes multiply with (= w in fp32,
    // w with the matrices replaced by params_lo views otherwise, see with_compute_matrices).
    Precision precision = Precision::fp32;
    Tensor params_lo;
    ModelW wf;
    uint64_t params_version = 0, lo_version = 0;
    // Names the weights in the keys of recorded steps: next_buffer_generation() at the last
    // set_precision or renew_generation.
    uint64_t lo_generation = 0;
    ExpertShard shard;  // the experts the buffers hold

    void set_precision(Precision p);
    void params_changed() { ++params_version; }
    void refresh_compute_weights();
    // Steps recorded with the weights as they are (or with other kernels) go stale.
    void renew_generation();
    // Makes `next` (the layout of the experts `to`) the layout with `moved` its parameters (the
    // old ones moved there: ModelImpl::set_expert_shard). The old buffers are freed first, the
    // gradients reallocated (zero) and the 16-bit copy refreshed before the next pass.
    void adopt_shard(const ExpertShard& to, std::vector<ParamInfo> next, Tensor moved);

  private:
    // Makes `next` the layout with `values` its parameters (fresh gradients, fp32 views).
    void adopt_layout(std::vector<ParamInfo> next, Tensor values);

    Device& dev_;
    const ModelConfig& cfg_;
};

}  // namespace moetrain
