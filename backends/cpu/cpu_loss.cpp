// CPU cross-entropy over rows of logits with ignored targets (-1), optionally overwriting the
// logits with the scaled gradient softmax - onehot. One row per iteration; the row's
// log-sum-exp is summed in double, the exponentials are SIMD (cpu_vecmath.h).
#include <algorithm>
#include <cmath>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_rowmath.h"

namespace moetrain {

void CpuDevice::cross_entropy(const Tensor& losses, const Tensor& logits, const Tensor& targets,
                              int64_t N, int64_t V, float grad_scale) {
    check_sizes("cross_entropy", {N, V});
    MT_CHECK(V >= 1, "cross_entropy: vocabulary size must be >= 1");
    float* pl = f32(losses, N, "cross_entropy", "losses");
    float* px = f32(logits, N * V, "cross_entropy", "logits");
    const int32_t* pt = i32(targets, N, "cross_entropy", "targets");
    for (int64_t n = 0; n < N; ++n)
        MT_CHECK(pt[n] == -1 || (pt[n] >= 0 && pt[n] < V), "cross_entropy: target ", pt[n],
                 " at row ", n, " outside 0..", V - 1, " (or -1 = ignore)");
#pragma omp parallel for schedule(static) if (N * V > cpu::kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
        float* x = px + n * V;
        const int32_t t = pt[n];
        const double lse = cpu::row_logsumexp(x, V);
        pl[n] = t < 0 ? 0.0f : static_cast<float>(lse - x[t]);
        if (grad_scale == 0.0f) continue;
        if (t < 0) {
            std::fill(x, x + V, 0.0f);
            continue;
        }
        const float flse = static_cast<float>(lse);
#pragma omp simd
        for (int64_t c = 0; c < V; ++c) x[c] = grad_scale * cpu::exp_f32(x[c] - flse);
        x[t] -= grad_scale;
    }
}

}  // namespace moetrain
