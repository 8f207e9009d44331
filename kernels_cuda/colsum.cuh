// Deterministic column sums over rows, out[c] += sum_r term(r, c): stage 1 sums fixed chunks of
// rows per column into scratch (one thread per column, rows in order), stage 2 adds the chunk
// sums in chunk order. Used for the bias gradient and the norm gain/bias gradients; the
// per-element term is a functor so each op sums exactly its own product.
#pragma once

#include "common.cuh"

namespace mtk {

template <typename Term>
__global__ void colsum_partial_kernel(Term term, int64_t rows, int64_t cols, int64_t rows_per_chunk,
                                      float* __restrict__ partial) {
    int64_t c = global_thread();
    if (c >= cols) return;
    int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
    int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; ++r) acc += term(r, c);
    partial[blockIdx.y * cols + c] = acc;
}

// static: one copy per translation unit that includes this header (no template to hang it on).
static __global__ void colsum_finish_kernel(const float* __restrict__ partial, int64_t chunks,
                                            int64_t cols, float* __restrict__ out) {
    int64_t c = global_thread();
    if (c >= cols) return;
    float acc = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) acc += partial[k * cols + c];
    out[c] += acc;
}

// out[c] += sum_r term(r, c); scratch holds colsum_scratch_bytes(rows, cols).
template <typename Term>
void colsum(Stream s, Term term, int64_t rows, int64_t cols, float* out, float* scratch) {
    if (rows <= 0 || cols <= 0) return;
    MT_LAUNCH(colsum_partial_kernel<Term>, colsum_partial(rows, cols), s, term, rows, cols,
              colsum_rows_per_chunk(rows), scratch);
    MT_LAUNCH(colsum_finish_kernel, colsum_finish(cols), s, scratch, colsum_chunks(rows), cols,
              out);
}

// term = m[r, c]
struct MatrixTerm {
    const float* m;
    int64_t cols;
    __device__ float operator()(int64_t r, int64_t c) const { return m[r * cols + c]; }
};

}  // namespace mtk
