// Row helpers shared by the CPU softmax, router and cross-entropy: a stable log-sum-exp
// (max shift, exponentials in f32 with the vectorisable exp of cpu_vecmath.h, their sum in
// double over the fixed SIMD lanes of cpu_simd.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu/cpu_simd.h"
#include "cpu/cpu_vecmath.h"

namespace moetrain::cpu {

inline double row_logsumexp(const float* x, int64_t n) {
    const float mx = lane_max(x, n);
    const double s = lane_sum<double>(n, [&](int64_t i) { return exp_f32(x[i] - mx); });
    return mx + std::log(s);
}

}  // namespace moetrain::cpu
