// Gradient checks of the model against float64 finite differences of the reference loss
// (tests/reference_model.h): the central difference with step 1e-6 (truncation ~1e-12,
// rounding ~1e-9) and the tolerance |ours - fd| <= 1e-3 |fd| + 1e-4 max|grad of the tensor|
// + 1e-8 (the floor covers tensors whose true gradient is 0, e.g. wk.bias under softmax).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "moetrain/model.h"

namespace moetrain::test {

constexpr double kFdStep = 1e-6;

// (loss at v + h - loss at v - h) / 2h, evaluated in that order; v is restored.
template <typename Loss>
double central_difference(double& v, Loss&& loss) {
    const double v0 = v;
    v = v0 + kFdStep;
    const double lp = loss();
    v = v0 - kFdStep;
    const double lm = loss();
    v = v0;
    return (lp - lm) / (2 * kFdStep);
}

// The largest |gradient| of tensor p in the flat gradients.
inline double max_abs_grad(const std::vector<float>& grads, const ParamInfo& p) {
    double gmax = 0;
    for (int64_t i = 0; i < p.numel(); ++i)
        gmax = std::max(gmax, std::abs(double{grads[static_cast<size_t>(p.offset + i)]}));
    return gmax;
}

inline double fd_tolerance(double fd, double gmax) {
    return 1e-3 * std::abs(fd) + 1e-4 * gmax + 1e-8;
}

}  // namespace moetrain::test
