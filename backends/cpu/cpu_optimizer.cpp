// CPU optimizer steps (MODEL.md 4): gradient scaling and global-norm clipping from the
// squared norm kept on the device, then the shared AdamW / SGD element update of mt_math.h.
#include "cpu/cpu_clip.h"
#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "shared/mt_math.h"

namespace moetrain {
void CpuDevice::adamw_impl(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                           int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                           float grad_scale) {
    const auto [pp, pg, pm, pv] = f32s(p, g, m, v);
    const float gs = grad_scale * clip_coefficient(*this, gnorm_sq, clip, grad_scale);
#pragma omp parallel for schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i)
        mt_adamw_update(pp + i, pm + i, pv + i, pg[i] * gs, a.lr, a.b1, a.b2, a.eps, a.wd, a.bc1,
                        a.bc2);
}

void CpuDevice::sgd_impl(const Tensor& p, const Tensor& g, int64_t n, float lr,
                         const Tensor& gnorm_sq, float clip, float grad_scale) {
    float* pp = f32(p);
    const float* pg = f32(g);
    const float gs = grad_scale * clip_coefficient(*this, gnorm_sq, clip, grad_scale);
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) pp[i] -= lr * (pg[i] * gs);
}

}  // namespace moetrain
