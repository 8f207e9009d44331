// Row helpers shared by the CPU softmax, router and cross-entropy: a stable log-sum-exp
// (max shift, exponentials in f32, their sum in double).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace moetrain::cpu {

inline double row_logsumexp(const float* x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - mx);
    return mx + std::log(s);
}

}  // namespace moetrain::cpu
