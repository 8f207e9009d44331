// Element-wise kernels: fill (any 1/2/4-byte element), add, axpby and the bias broadcast.
// Grid-stride loops with the elementwise() geometry of launch.h; each element is touched by
// exactly one thread, so the results do not depend on the schedule. All four stream whole
// tensors: 16-byte accesses where the pointers allow (vector_access.cuh), one element at a
// time elsewhere, the same per-element expression on both paths.
#pragma once

#include "common.cuh"
#include "vector_access.cuh"

namespace mtk {

// word: the 4-byte pattern of `value` repeated (what a 16-byte group is filled with).
template <typename T>
__global__ void fill_kernel(T* out, T value, uint32_t word, VecSplit s) {
    constexpr int W = static_cast<int>(16 / sizeof(T));
    for_split_grid<W>(s, [&](auto w, int64_t i) {
        if constexpr (decltype(w)::n == 1)
            out[i] = value;
        else
            store_vec(out + i, make_uint4(word, word, word, word));
    });
}

// out may alias a or b.
__global__ void add_kernel(float* out, const float* a, const float* b, VecSplit s) {
    for_split_grid(s, [&](auto w, int64_t i) {
        auto x = load_lanes(w, a + i);
        const auto y = load_lanes(w, b + i);
        for (int u = 0; u < w.n; ++u) x[u] = x[u] + y[u];
        store_lanes(w, out + i, x);
    });
}

// beta == 0: y is only written (it may hold garbage, as in BLAS). The branch on beta stays
// outside the lane loops, so every lane is the same expression as a single element.
__global__ void axpby_kernel(float* y, float alpha, const float* x, float beta, VecSplit s) {
    for_split_grid(s, [&](auto w, int64_t i) {
        auto v = load_lanes(w, x + i);
        if (beta == 0.0f) {
            for (int u = 0; u < w.n; ++u) v[u] = alpha * v[u];
        } else {
            const auto yv = load_lanes(w, y + i);
            for (int u = 0; u < w.n; ++u) v[u] = alpha * v[u] + beta * yv[u];
        }
        store_lanes(w, y + i, v);
    });
}

// Vector groups only when cols % 4 == 0 and y and bias both start a group, so a group never
// crosses a row and its bias is one aligned group too.
__global__ void add_bias_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t cols,
                                VecSplit s) {
    for_split_grid(s, [&](auto w, int64_t i) {
        auto yv = load_lanes(w, y + i);
        const auto bv = load_lanes(w, bias + i % cols);
        for (int u = 0; u < w.n; ++u) yv[u] += bv[u];
        store_lanes(w, y + i, yv);
    });
}

template <typename T>
void fill_elements(Stream s, T* out, uint32_t bits, int64_t n) {
    constexpr int W = static_cast<int>(16 / sizeof(T));
    const T value = static_cast<T>(bits);
    uint32_t word = value;
    for (size_t b = sizeof(T); b < 4; b *= 2) word |= word << (8 * b);
    const VecSplit sp = vec_split<W>(n, out);
    MT_LAUNCH(fill_kernel<T>, elementwise(sp.groups, vec_singles<W>(sp)), s, out, value, word, sp);
}

// out[i] = the elem_bytes-wide bit pattern `bits` (elem_bytes 1, 2 or 4).
void fill(Stream s, void* out, int elem_bytes, uint32_t bits, int64_t n) {
    if (n <= 0) return;
    if (elem_bytes == 4)
        fill_elements(s, static_cast<uint32_t*>(out), bits, n);
    else if (elem_bytes == 2)
        fill_elements(s, static_cast<uint16_t*>(out), bits, n);
    else
        fill_elements(s, static_cast<uint8_t*>(out), bits, n);
}

void add(Stream s, float* out, const float* a, const float* b, int64_t n) {
    if (n <= 0) return;
    const VecSplit sp = vec_split(n, out, a, b);
    MT_LAUNCH(add_kernel, elementwise(sp.groups, vec_singles(sp)), s, out, a, b, sp);
}

void axpby(Stream s, float* y, float alpha, const float* x, float beta, int64_t n) {
    if (n <= 0) return;
    const VecSplit sp = vec_split(n, y, x);
    MT_LAUNCH(axpby_kernel, elementwise(sp.groups, vec_singles(sp)), s, y, alpha, x, beta, sp);
}

void add_bias(Stream s, float* y, const float* bias, int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0) return;
    const VecSplit sp =
        rows_vectorisable(cols, y, bias) ? vec_split(rows * cols, y) : single_elements(rows * cols);
    MT_LAUNCH(add_bias_kernel, elementwise(sp.groups, vec_singles(sp)), s, y, bias, cols, sp);
}

}  // namespace mtk
