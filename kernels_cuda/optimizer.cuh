// Optimizer updates (MODEL.md 4): AdamW and SGD, one thread per parameter. The gradient is
// scaled by grad_scale and the global-norm clip coefficient (mt_clip_coef of the squared norm
// that is already on the device), then mt_adamw_update / p -= lr g'.
#pragma once

#include "common.cuh"

namespace mtk {

__device__ __forceinline__ float clip_coef(const float* gnorm_sq, float clip, float grad_scale) {
    return (gnorm_sq && clip > 0.0f) ? mt_clip_coef(gnorm_sq[0], grad_scale, clip) : 1.0f;
}

__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g,
                             float* __restrict__ m, float* __restrict__ v, int64_t n,
                             AdamWParams a, const float* __restrict__ gnorm_sq, float clip,
                             float grad_scale) {
    const float coef = clip_coef(gnorm_sq, clip, grad_scale);
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        float pi = p[i], mi = m[i], vi = v[i];
        mt_adamw_update(&pi, &mi, &vi, g[i] * grad_scale * coef, a.lr, a.b1, a.b2, a.eps, a.wd,
                        a.bc1, a.bc2);
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
    }
}

__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g, int64_t n, float lr,
                           const float* __restrict__ gnorm_sq, float clip, float grad_scale) {
    const float coef = clip_coef(gnorm_sq, clip, grad_scale);
    for (int64_t i = global_thread(); i < n; i += grid_threads()) p[i] -= lr * (g[i] * grad_scale * coef);
}

void adamw(Stream s, float* p, const float* g, float* m, float* v, int64_t n,
           const AdamWParams& a, const float* gnorm_sq, float clip, float grad_scale) {
    if (n > 0) MT_LAUNCH(adamw_kernel, elementwise(n), s, p, g, m, v, n, a, gnorm_sq, clip, grad_scale);
}

void sgd(Stream s, float* p, const float* g, int64_t n, float lr, const float* gnorm_sq,
         float clip, float grad_scale) {
    if (n > 0) MT_LAUNCH(sgd_kernel, elementwise(n), s, p, g, n, lr, gnorm_sq, clip, grad_scale);
}

}  // namespace mtk
