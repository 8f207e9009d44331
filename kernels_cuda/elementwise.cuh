// Element-wise kernels: fill (any 1/2/4-byte element), add, axpby and the bias broadcast.
// Grid-stride loops with the elementwise() geometry of launch.h; each element is touched by
// exactly one thread, so the results do not depend on the schedule.
#pragma once

#include "common.cuh"

namespace mtk {

template <typename T>
__global__ void fill_kernel(T* out, T value, int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) out[i] = value;
}

// out may alias a or b.
__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) out[i] = a[i] + b[i];
}

// beta == 0: y is only written (it may hold garbage, as in BLAS).
__global__ void axpby_kernel(float* y, float alpha, const float* x, float beta, int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads())
        y[i] = beta == 0.0f ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

__global__ void add_bias_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                int64_t rows, int64_t cols) {
    for (int64_t i = global_thread(); i < rows * cols; i += grid_threads()) y[i] += bias[i % cols];
}

void fill(Stream s, void* out, int elem_bytes, uint32_t bits, int64_t n) {
    if (n <= 0) return;
    Geom g = elementwise(n);
    if (elem_bytes == 4)
        MT_LAUNCH(fill_kernel<uint32_t>, g, s, static_cast<uint32_t*>(out), bits, n);
    else if (elem_bytes == 2)
        MT_LAUNCH(fill_kernel<uint16_t>, g, s, static_cast<uint16_t*>(out),
                  static_cast<uint16_t>(bits), n);
    else
        MT_LAUNCH(fill_kernel<uint8_t>, g, s, static_cast<uint8_t*>(out),
                  static_cast<uint8_t>(bits), n);
}

void add(Stream s, float* out, const float* a, const float* b, int64_t n) {
    if (n > 0) MT_LAUNCH(add_kernel, elementwise(n), s, out, a, b, n);
}

void axpby(Stream s, float* y, float alpha, const float* x, float beta, int64_t n) {
    if (n > 0) MT_LAUNCH(axpby_kernel, elementwise(n), s, y, alpha, x, beta, n);
}

void add_bias(Stream s, float* y, const float* bias, int64_t rows, int64_t cols) {
    if (rows > 0 && cols > 0) MT_LAUNCH(add_bias_kernel, elementwise(rows * cols), s, y, bias, rows, cols);
}

}  // namespace mtk
