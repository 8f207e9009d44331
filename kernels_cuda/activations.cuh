// Activations (MODEL.md 2): gelu (tanh), relu, silu forward / backward, SwiGLU and the
// row-wise stable softmax (one block per row). Per-element math from mt_math.h.
#pragma once

#include "common.cuh"

namespace mtk {

__device__ __forceinline__ float act_value(int act, float z) {
    return act == 0 ? mt_gelu(z) : act == 1 ? mt_relu(z) : mt_silu(z);
}
__device__ __forceinline__ float act_grad(int act, float z) {
    return act == 0 ? mt_gelu_grad(z) : act == 1 ? mt_relu_grad(z) : mt_silu_grad(z);
}

__global__ void act_fwd_kernel(int act, float* y, const float* x, int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = act_value(act, x[i]);
}

__global__ void act_bwd_kernel(int act, float* dx, const float* dy, const float* x, int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) dx[i] = dy[i] * act_grad(act, x[i]);
}

__global__ void swiglu_fwd_kernel(float* h, const float* gate, const float* up, int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) h[i] = mt_silu(gate[i]) * up[i];
}

__global__ void swiglu_bwd_kernel(float* dgate, float* dup, const float* dh, const float* gate,
                                  const float* up, int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        float g = gate[i], u = up[i], d = dh[i];
        dgate[i] = d * u * mt_silu_grad(g);
        dup[i] = d * mt_silu(g);
    }
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

void act_fwd(Stream s, ActKind act, float* y, const float* x, int64_t n) {
    if (n > 0) MT_LAUNCH(act_fwd_kernel, elementwise(n), s, static_cast<int>(act), y, x, n);
}

void act_bwd(Stream s, ActKind act, float* dx, const float* dy, const float* x, int64_t n) {
    if (n > 0) MT_LAUNCH(act_bwd_kernel, elementwise(n), s, static_cast<int>(act), dx, dy, x, n);
}

void swiglu_fwd(Stream s, float* h, const float* gate, const float* up, int64_t n) {
    if (n > 0) MT_LAUNCH(swiglu_fwd_kernel, elementwise(n), s, h, gate, up, n);
}

void swiglu_bwd(Stream s, float* dgate, float* dup, const float* dh, const float* gate,
                const float* up, int64_t n) {
    if (n > 0) MT_LAUNCH(swiglu_bwd_kernel, elementwise(n), s, dgate, dup, dh, gate, up, n);
}

void softmax(Stream s, float* y, const float* x, int64_t rows, int64_t cols) {
    if (rows > 0 && cols > 0) MT_LAUNCH(softmax_kernel, per_row(rows, cols), s, y, x, cols);
}

}  // namespace mtk
