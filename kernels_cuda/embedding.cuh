// Embedding lookup and its gradient. The backward pass is deterministic without atomics: the
// grid's y dimension splits the table rows into buckets (id % buckets), each (bucket, column)
// thread walks the n tokens in order and adds the rows of its bucket, so duplicate ids are
// summed in token order by a single thread.
#pragma once

#include "common.cuh"

namespace mtk {

__global__ void embedding_fwd_kernel(float* __restrict__ out, const float* __restrict__ table,
                                     const int32_t* __restrict__ ids, int64_t n, int64_t dim,
                                     bool accumulate) {
    for (int64_t i = global_thread(); i < n * dim; i += grid_threads()) {
        int64_t t = i / dim, c = i - t * dim;
        float v = table[static_cast<int64_t>(ids[t]) * dim + c];
        out[i] = accumulate ? out[i] + v : v;
    }
}

__global__ void embedding_bwd_kernel(float* __restrict__ dtable, const float* __restrict__ dout,
                                     const int32_t* __restrict__ ids, int64_t n, int64_t dim) {
    const int64_t c = global_thread();
    if (c >= dim) return;
    const int32_t buckets = static_cast<int32_t>(gridDim.y), mine = static_cast<int32_t>(blockIdx.y);
    for (int64_t i = 0; i < n; ++i) {
        int32_t id = ids[i];
        if (id % buckets == mine) dtable[static_cast<int64_t>(id) * dim + c] += dout[i * dim + c];
    }
}

void embedding_fwd(Stream s, float* out, const float* table, const int32_t* ids, int64_t n,
                   int64_t dim, bool accumulate) {
    if (n > 0 && dim > 0)
        MT_LAUNCH(embedding_fwd_kernel, elementwise(n * dim), s, out, table, ids, n, dim, accumulate);
}

void embedding_bwd(Stream s, float* dtable, const float* dout, const int32_t* ids, int64_t n,
                   int64_t dim) {
    if (n > 0 && dim > 0)
        MT_LAUNCH(embedding_bwd_kernel, mtk::embedding_bwd(n, dim), s, dtable, dout, ids, n, dim);
}

}  // namespace mtk
