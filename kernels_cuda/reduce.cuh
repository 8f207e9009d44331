// Reductions: sum and sum of squares of a vector (two stages: a partial per block over a
// problem-size-fixed number of blocks, then one block adds the partials in order) and the bias
// gradient (column sums, colsum.cuh). No floating-point atomics: results are deterministic.
#pragma once

#include "colsum.cuh"
#include "common.cuh"
#include "vector_access.cuh"  // the column sums' 16-byte path (kernels_cuda/README.md rule 8)

namespace mtk {

template <bool kSquare>
__global__ void reduce_partial_kernel(const float* __restrict__ x, int64_t n,
                                      float* __restrict__ partial) {
    float acc = 0.0f;
    for (int64_t i = global_thread(); i < n; i += grid_threads())
        acc += kSquare ? x[i] * x[i] : x[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void reduce_finish_kernel(const float* __restrict__ partial, int parts, float* out,
                                     float scale, bool accumulate) {
    float acc = 0.0f;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) acc += partial[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) out[0] = (accumulate ? out[0] : 0.0f) + scale * acc;
}

template <bool kSquare>
void reduce(Stream s, float* out, const float* x, int64_t n, float scale, bool accumulate,
            float* scratch) {
    // n == 0: no partials; the finish kernel still writes the empty sum (out = 0 or unchanged).
    int parts = n > 0 ? static_cast<int>(reduce_parts(n)) : 0;
    if (n > 0) MT_LAUNCH(reduce_partial_kernel<kSquare>, reduce_partial(n), s, x, n, scratch);
    MT_LAUNCH(reduce_finish_kernel, reduce_finish(), s, scratch, parts, out, scale, accumulate);
}

void sum(Stream s, float* out, const float* x, int64_t n, float scale, bool accumulate,
         float* scratch) {
    reduce<false>(s, out, x, n, scale, accumulate, scratch);
}

void sum_squares(Stream s, float* out, const float* x, int64_t n, bool accumulate, float* scratch) {
    reduce<true>(s, out, x, n, 1.0f, accumulate, scratch);
}

// dy of dtype dy_kind (f32, or 16-bit values widened exactly).
void bias_grad(Stream s, float* dbias, const void* dy, int64_t rows, int64_t cols, float* scratch,
               FloatKind dy_kind = FloatKind::f32) {
    colsum(s, MatrixTerm{dy, static_cast<int>(dy_kind), cols}, rows, cols, ColsumOut<1>{{dbias}},
           scratch);
}

}  // namespace mtk
