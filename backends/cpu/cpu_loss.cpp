// CPU cross-entropy over rows of logits with ignored targets (-1), optionally writing the scaled
// gradient softmax - onehot over the logits or into dlogits (f32 / bf16 / f16, cpu_float_out.h).
// One row per iteration; the row's exponentials are SIMD (cpu_vecmath.h), computed once and
// summed in double.
#include <algorithm>
#include <cmath>

#include "cpu/cpu_device.h"
#include "cpu/cpu_float_out.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_rowmath.h"

namespace moetrain {

void CpuDevice::cross_entropy_impl(const Tensor& losses, const Tensor& logits,
                                   const Tensor& targets, int64_t N, int64_t V, float grad_scale,
                                   const Tensor& dlogits) {
    float* pl = f32(losses);
    float* px = f32(logits);
    const int32_t* pt = i32(targets);
    for (int64_t n = 0; n < N; ++n)
        MT_CHECK(pt[n] == -1 || (pt[n] >= 0 && pt[n] < V), "cross_entropy: target ", pt[n],
                 " at row ", n, " outside 0..", V - 1, " (or -1 = ignore)");
    // Where the gradient rows go: the logits themselves, or dlogits (rounded when 16-bit).
    const bool in_place = !dlogits || raw(dlogits) == raw(logits);
    const cpu::RowsOut out(in_place ? raw(logits) : raw(dlogits),
                           in_place ? DType::f32 : dlogits.dtype, V);
#pragma omp parallel for schedule(static) if (N * V > cpu::kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
        const float* x = px + n * V;
        const int32_t t = pt[n];
        if (grad_scale == 0.0f) {  // loss only: the logits stay as they are
            pl[n] = t < 0 ? 0.0f : static_cast<float>(cpu::row_logsumexp(x, V) - x[t]);
            continue;
        }
        float* g = out.at(n);
        if (t < 0) {
            pl[n] = 0.0f;
            std::fill(g, g + V, 0.0f);
            out.done(n, g);
            continue;
        }
        // One exp per logit: e = exp(x - max) goes into the gradient row (the logits row itself
        // in place), then the gradient is grad_scale * e / sum(e) - grad_scale * onehot.
        const float xt = x[t], mx = cpu::lane_max(x, V);
        const double sum =
            cpu::lane_sum<double>(V, [&](int64_t c) { return g[c] = cpu::exp_f32(x[c] - mx); });
        pl[n] = static_cast<float>(mx + std::log(sum) - xt);
        const float coef = static_cast<float>(grad_scale / sum);
#pragma omp simd
        for (int64_t c = 0; c < V; ++c) g[c] *= coef;
        g[t] -= grad_scale;
        out.done(n, g);
    }
}

}  // namespace moetrain
