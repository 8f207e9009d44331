// CPU cross-entropy over rows of logits with ignored targets (-1), optionally overwriting the
// logits with the scaled gradient softmax - onehot. One row per iteration; the row's
// exponentials are SIMD (cpu_vecmath.h), computed once and summed in double.
#include <algorithm>
#include <cmath>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_rowmath.h"

namespace moetrain {

void CpuDevice::cross_entropy_impl(const Tensor& losses, const Tensor& logits,
                                   const Tensor& targets, int64_t N, int64_t V, float grad_scale) {
    float* pl = f32(losses);
    float* px = f32(logits);
    const int32_t* pt = i32(targets);
    for (int64_t n = 0; n < N; ++n)
        MT_CHECK(pt[n] == -1 || (pt[n] >= 0 && pt[n] < V), "cross_entropy: target ", pt[n],
                 " at row ", n, " outside 0..", V - 1, " (or -1 = ignore)");
#pragma omp parallel for schedule(static) if (N * V > cpu::kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
        float* x = px + n * V;
        const int32_t t = pt[n];
        if (grad_scale == 0.0f) {  // loss only: the logits stay as they are
            pl[n] = t < 0 ? 0.0f : static_cast<float>(cpu::row_logsumexp(x, V) - x[t]);
            continue;
        }
        if (t < 0) {
            pl[n] = 0.0f;
            std::fill(x, x + V, 0.0f);
            continue;
        }
        // One exp per logit: e = exp(x - max) overwrites the row, then the gradient is
        // grad_scale * e / sum(e) - grad_scale * onehot.
        const float xt = x[t], mx = cpu::lane_max(x, V);
        const double sum =
            cpu::lane_sum<double>(V, [&](int64_t c) { return x[c] = cpu::exp_f32(x[c] - mx); });
        pl[n] = static_cast<float>(mx + std::log(sum) - xt);
        const float coef = static_cast<float>(grad_scale / sum);
#pragma omp simd
        for (int64_t c = 0; c < V; ++c) x[c] *= coef;
        x[t] -= grad_scale;
    }
}

}  // namespace moetrain
