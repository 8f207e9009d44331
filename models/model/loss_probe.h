// What gradcheck (models/train/gradcheck.cpp) needs from a Model beyond its public API: the loss
// of one batch with the cross-entropy summed in double, and the MoE routing decisions it took,
// so that a probe can tell when a perturbation moved a token to another expert.
#pragma once

#include <cstdint>
#include <vector>

#include "moetrain/model.h"

namespace moetrain {

class LossProbe {
  public:
    explicit LossProbe(Model& model);

    // Loss terms of the batch x, y [B*T]; every MoE layer's chosen experts are appended to
    // *routing when it is not null.
    LossStats loss_f64(const int32_t* x, const int32_t* y, int B, int T,
                       std::vector<int32_t>* routing);

  private:
    ModelImpl& im_;
};

}  // namespace moetrain
