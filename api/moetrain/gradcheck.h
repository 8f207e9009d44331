// Gradient check of a model on its device: for every parameter tensor, central finite
// differences of the loss (cross-entropy summed in double on the host) along a few random
// directions, compared with the analytic gradient of Model::forward_backward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moetrain/model.h"

namespace moetrain {

struct GradcheckOptions {
    int batch = 2;            // B of the random batch
    int seq_len = 8;          // T (capped at max_seq_len)
    int directions = 2;       // random directions per tensor
    double step = 0.1;        // largest perturbation per element, relative to the tensor's RMS
                              // (at least 0.02); smaller when the loss moves enough
    double tolerance = 2e-2;  // pass if every relative error is below this
    uint64_t seed = 1234;     // batch and directions
};

struct TensorGradcheck {
    std::string name;
    double analytic = 0;   // g . (p+ - p-) of the worst direction
    double numeric = 0;    // L(p+) - L(p-) of the worst direction
    double rel_error = 0;  // |numeric - analytic| / max(|numeric| + |analytic|, 3e-5)
    bool pass = false;
};

struct GradcheckResult {
    std::vector<TensorGradcheck> tensors;
    double tolerance = 0;
    double max_rel_error = 0;
    bool pass = false;
};

// Checks every tensor of model.params() with the model's current weights (restored after
// each probe). Overwrites the gradient buffer. Perturbations that change an MoE routing
// decision are shrunk until the routing stays fixed (the loss is discontinuous there).
GradcheckResult gradcheck(Model& model, const GradcheckOptions& opts = {});

}  // namespace moetrain
