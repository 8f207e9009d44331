// Optimizer updates (MODEL.md 4): AdamW and SGD, one parameter per thread and step. The
// gradient is scaled by grad_scale and the global-norm clip coefficient (mt_clip_coef of the
// squared norm that is already on the device), then mt_adamw_update / p -= lr g'. AdamW and
// SGD stream every parameter: four per access where the pointers allow (vector_access.cuh),
// one at a time elsewhere, the same update on both paths. 8-bit AdamW: one block per block of
// MT_QBLOCK state elements (mt_adamw8bit_update, a block max, requantisation); it stays one
// element per thread (kernels_cuda/README.md: its cost is the two 8-step binary searches in
// shared memory and the block maxima, not its 16 bytes of global traffic per element).
#pragma once

#include "common.cuh"
#include "vector_access.cuh"

namespace mtk {

struct AdamWParams {
    float lr = 0, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0, bc1 = 1, bc2 = 1;
};

__device__ __forceinline__ float clip_coef(const float* gnorm_sq, float clip, float grad_scale) {
    return (gnorm_sq && clip > 0.0f) ? mt_clip_coef(gnorm_sq[0], grad_scale, clip) : 1.0f;
}

__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g,
                             float* __restrict__ m, float* __restrict__ v, AdamWParams a,
                             const float* __restrict__ gnorm_sq, float clip, float grad_scale,
                             VecSplit s) {
    const float coef = clip_coef(gnorm_sq, clip, grad_scale);
    for_split_grid(s, [&](auto w, int64_t i) {
        auto pv = load_lanes(w, p + i), mv = load_lanes(w, m + i), vv = load_lanes(w, v + i);
        const auto gv = load_lanes(w, g + i);
        for (int u = 0; u < w.n; ++u)
            mt_adamw_update(&pv[u], &mv[u], &vv[u], gv[u] * grad_scale * coef, a.lr, a.b1, a.b2,
                            a.eps, a.wd, a.bc1, a.bc2);
        store_lanes(w, p + i, pv);
        store_lanes(w, m + i, mv);
        store_lanes(w, v + i, vv);
    });
}

// Thread t owns element t of each state block (kQuantBlock = MT_QBLOCK threads); the maps are
// staged in shared memory once per CUDA block, which then strides over the state blocks.
__global__ void adamw8bit_kernel(float* __restrict__ p, const float* __restrict__ g,
                                 uint8_t* __restrict__ mc, uint8_t* __restrict__ vc,
                                 float* __restrict__ ma, float* __restrict__ va,
                                 const float* __restrict__ table, int64_t n, AdamWParams a,
                                 const float* __restrict__ gnorm_sq, float clip, float grad_scale) {
    __shared__ float map[MT_QMAP_LEN];
    for (int i = threadIdx.x; i < MT_QMAP_LEN; i += blockDim.x) map[i] = table[i];
    __syncthreads();
    const float gs = grad_scale * clip_coef(gnorm_sq, clip, grad_scale);
    const int64_t blocks = (n + MT_QBLOCK - 1) / MT_QBLOCK;
    for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
        const int64_t i = b * MT_QBLOCK + threadIdx.x;
        const bool live = i < n;
        float mi = 0.0f, vi = 0.0f;  // threads past the end add 0 to the maxima
        if (live) {
            float pi = p[i];
            mt_adamw8bit_update(&pi, &mi, &vi, map, mc[i], vc[i], ma[b], va[b], g[i] * gs, a.lr,
                                a.b1, a.b2, a.eps, a.wd, a.bc1, a.bc2);
            p[i] = pi;
        }
        // Every thread has read ma[b], va[b] before the barriers of block_max.
        const float m_max = block_max(fabsf(mi));
        const float v_max = block_max(vi);
        if (threadIdx.x == 0) {
            ma[b] = m_max;
            va[b] = v_max;
        }
        if (live) {
            int m_code, v_code;
            mt_requantize(map, mi, vi, m_max, v_max, &m_code, &v_code);
            mc[i] = static_cast<uint8_t>(m_code);
            vc[i] = static_cast<uint8_t>(v_code);
        }
    }
}

__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g, float lr,
                           const float* __restrict__ gnorm_sq, float clip, float grad_scale,
                           VecSplit s) {
    const float coef = clip_coef(gnorm_sq, clip, grad_scale);
    for_split_grid(s, [&](auto w, int64_t i) {
        auto pv = load_lanes(w, p + i);
        const auto gv = load_lanes(w, g + i);
        for (int u = 0; u < w.n; ++u) pv[u] -= lr * (gv[u] * grad_scale * coef);
        store_lanes(w, p + i, pv);
    });
}

// gnorm_sq may be nullptr when clip <= 0 (adamw, adamw8bit, sgd).
void adamw(Stream s, float* p, const float* g, float* m, float* v, int64_t n, const AdamWParams& a,
           const float* gnorm_sq, float clip, float grad_scale) {
    if (n <= 0) return;
    const VecSplit sp = vec_split(n, p, g, m, v);
    MT_LAUNCH(adamw_kernel, elementwise(sp.groups, vec_singles(sp)), s, p, g, m, v, a, gnorm_sq,
              clip, grad_scale, sp);
}

// 8-bit AdamW (moetrain::Device::adamw8bit): codes [n], absmax [ceil(n / 256)]; table: the
// MT_QMAP_LEN quantisation maps of mt_math.h in device memory.
void adamw8bit(Stream s, float* p, const float* g, uint8_t* m_codes, uint8_t* v_codes,
               float* m_absmax, float* v_absmax, const float* table, int64_t n,
               const AdamWParams& a, const float* gnorm_sq, float clip, float grad_scale) {
    static_assert(kQuantBlock == MT_QBLOCK, "one thread per element of a quantisation block");
    if (n > 0)
        MT_LAUNCH(adamw8bit_kernel, quant_blocks(n), s, p, g, m_codes, v_codes, m_absmax, v_absmax,
                  table, n, a, gnorm_sq, clip, grad_scale);
}

void sgd(Stream s, float* p, const float* g, int64_t n, float lr, const float* gnorm_sq, float clip,
         float grad_scale) {
    if (n <= 0) return;
    const VecSplit sp = vec_split(n, p, g);
    MT_LAUNCH(sgd_kernel, elementwise(sp.groups, vec_singles(sp)), s, p, g, lr, gnorm_sq, clip,
              grad_scale, sp);
}

}  // namespace mtk
