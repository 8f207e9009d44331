// CPU optimizer steps (MODEL.md 4): gradient scaling and global-norm clipping from the
// squared norm kept on the device, then the shared AdamW / SGD element update of mt_math.h.
#include "cpu/cpu_clip.h"
#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "shared/mt_math.h"

namespace moetrain {
void CpuDevice::adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                      int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                      float grad_scale) {
    check_sizes("adamw", {n});
    MT_CHECK(a.bc1 > 0 && a.bc2 > 0, "adamw: bias corrections must be positive (step >= 1)");
    float* pp = f32(p, n, "adamw", "p");
    const float* pg = f32(g, n, "adamw", "g");
    float* pm = f32(m, n, "adamw", "m");
    float* pv = f32(v, n, "adamw", "v");
    const float gs = grad_scale * clip_coefficient(*this, gnorm_sq, clip, grad_scale, "adamw");
#pragma omp parallel for schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i)
        mt_adamw_update(pp + i, pm + i, pv + i, pg[i] * gs, a.lr, a.b1, a.b2, a.eps, a.wd, a.bc1,
                        a.bc2);
}

void CpuDevice::sgd(const Tensor& p, const Tensor& g, int64_t n, float lr, const Tensor& gnorm_sq,
                    float clip, float grad_scale) {
    check_sizes("sgd", {n});
    float* pp = f32(p, n, "sgd", "p");
    const float* pg = f32(g, n, "sgd", "g");
    const float gs = grad_scale * clip_coefficient(*this, gnorm_sq, clip, grad_scale, "sgd");
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) pp[i] -= lr * (pg[i] * gs);
}

}  // namespace moetrain
