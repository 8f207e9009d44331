// Activations (MODEL.md 2): gelu (tanh), relu, silu forward / backward, SwiGLU and the
// row-wise stable softmax (one block per row). Per-element math from mt_math.h. The
// element-wise kernels stream [N, F] tensors: four elements per access where the pointers
// allow (vector_access.cuh), one at a time elsewhere, the same expression on both paths. The
// softmax stays one element per thread (its reductions fix the summation order).
#pragma once

#include "common.cuh"
#include "vector_access.cuh"

namespace mtk {

__device__ __forceinline__ float act_value(int act, float z) {
    return act == 0 ? mt_gelu(z) : act == 1 ? mt_relu(z) : mt_silu(z);
}
__device__ __forceinline__ float act_grad(int act, float z) {
    return act == 0 ? mt_gelu_grad(z) : act == 1 ? mt_relu_grad(z) : mt_silu_grad(z);
}

// y / h of dtype y_kind (FloatKind): 16-bit outputs are the f32 values rounded (store_from_f32).
__global__ void act_fwd_kernel(int act, void* y, int y_kind, const float* x, VecSplit s) {
    for_split_grid(s, [&](auto w, int64_t i) {
        auto v = load_lanes(w, x + i);
        for (int u = 0; u < w.n; ++u) v[u] = act_value(act, v[u]);
        store_from_f32(w, y, y_kind, i, v);
    });
}

// dx of dtype dx_kind; an f32 dx may be dy (each element is read before it is written).
__global__ void act_bwd_kernel(int act, void* dx, int dx_kind, const float* dy, const float* x,
                               VecSplit s) {
    for_split_grid(s, [&](auto w, int64_t i) {
        auto d = load_lanes(w, dy + i);
        const auto xv = load_lanes(w, x + i);
        for (int u = 0; u < w.n; ++u) d[u] = d[u] * act_grad(act, xv[u]);
        store_from_f32(w, dx, dx_kind, i, d);
    });
}

__global__ void swiglu_fwd_kernel(void* h, int h_kind, const float* gate, const float* up,
                                  VecSplit s) {
    for_split_grid(s, [&](auto w, int64_t i) {
        auto gv = load_lanes(w, gate + i);
        const auto uv = load_lanes(w, up + i);
        for (int u = 0; u < w.n; ++u) gv[u] = mt_silu(gv[u]) * uv[u];
        store_from_f32(w, h, h_kind, i, gv);
    });
}

__global__ void swiglu_bwd_kernel(float* dgate, float* dup, const float* dh, const float* gate,
                                  const float* up, VecSplit s) {
    for_split_grid(s, [&](auto w, int64_t i) {
        const auto gv = load_lanes(w, gate + i), uv = load_lanes(w, up + i),
                   d = load_lanes(w, dh + i);
        auto dg = d, du = d;  // every lane is overwritten
        for (int u = 0; u < w.n; ++u) {
            dg[u] = d[u] * uv[u] * mt_silu_grad(gv[u]);
            du[u] = d[u] * mt_silu(gv[u]);
        }
        store_lanes(w, dgate + i, dg);
        store_lanes(w, dup + i, du);
    });
}

// y may alias x: every read of the row happens before the barrier inside the second reduction.
__global__ void softmax_kernel(float* y, const float* x, int64_t cols) {
    const float* xr = x + blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_max(m);
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
    const float inv = 1.0f / block_sum(s);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        y[blockIdx.x * cols + c] = expf(xr[c] - m) * inv;
}

void act_fwd(Stream s, ActKind act, void* y, const float* x, int64_t n,
             FloatKind y_kind = FloatKind::f32) {
    if (n <= 0) return;
    const int yk = static_cast<int>(y_kind);
    const VecSplit sp = vec_split(n, VecPtr{y, kind_bytes(yk)}, x);
    MT_LAUNCH(act_fwd_kernel, elementwise(sp.groups, vec_singles(sp)), s, static_cast<int>(act), y,
              yk, x, sp);
}

void act_bwd(Stream s, ActKind act, void* dx, const float* dy, const float* x, int64_t n,
             FloatKind dx_kind = FloatKind::f32) {
    if (n <= 0) return;
    const int dk = static_cast<int>(dx_kind);
    const VecSplit sp = vec_split(n, VecPtr{dx, kind_bytes(dk)}, dy, x);
    MT_LAUNCH(act_bwd_kernel, elementwise(sp.groups, vec_singles(sp)), s, static_cast<int>(act), dx,
              dk, dy, x, sp);
}

void swiglu_fwd(Stream s, void* h, const float* gate, const float* up, int64_t n,
                FloatKind h_kind = FloatKind::f32) {
    if (n <= 0) return;
    const int hk = static_cast<int>(h_kind);
    const VecSplit sp = vec_split(n, VecPtr{h, kind_bytes(hk)}, gate, up);
    MT_LAUNCH(swiglu_fwd_kernel, elementwise(sp.groups, vec_singles(sp)), s, h, hk, gate, up, sp);
}

void swiglu_bwd(Stream s, float* dgate, float* dup, const float* dh, const float* gate,
                const float* up, int64_t n) {
    if (n <= 0) return;
    const VecSplit sp = vec_split(n, dgate, dup, dh, gate, up);
    MT_LAUNCH(swiglu_bwd_kernel, elementwise(sp.groups, vec_singles(sp)), s, dgate, dup, dh, gate,
              up, sp);
}

void softmax(Stream s, float* y, const float* x, int64_t rows, int64_t cols) {
    if (rows > 0 && cols > 0) MT_LAUNCH(softmax_kernel, per_row(rows, cols), s, y, x, cols);
}

}  // namespace mtk
