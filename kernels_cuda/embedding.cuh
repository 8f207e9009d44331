// Embedding lookup and its gradient (ids outside the table are skipped and reported). The
// backward pass is deterministic without atomics: the
// grid's y dimension splits the table rows into buckets (id % buckets), each (bucket, column)
// thread walks the n tokens in order and adds the rows of its bucket, so duplicate ids are
// summed in token order by a single thread.
#pragma once

#include "common.cuh"

namespace mtk {

__global__ void embedding_fwd_kernel(float* __restrict__ out, const float* __restrict__ table,
                                     int64_t rows, const int32_t* __restrict__ ids, int64_t n,
                                     int64_t dim, bool accumulate, int32_t* err) {
    for (int64_t i = global_thread(); i < n * dim; i += grid_threads()) {
        int64_t t = i / dim, c = i - t * dim;
        const int32_t id = ids[t];
        if (!in_range(id, rows)) {  // reported once per token, the row is left as it was
            if (c == 0) report_error(err, kErrEmbeddingFwdId, id);
            continue;
        }
        float v = table[static_cast<int64_t>(id) * dim + c];
        out[i] = accumulate ? out[i] + v : v;
    }
}

__global__ void embedding_bwd_kernel(float* __restrict__ dtable, int64_t rows,
                                     const float* __restrict__ dout,
                                     const int32_t* __restrict__ ids, int64_t n, int64_t dim,
                                     int32_t* err) {
    const int64_t c = global_thread();
    if (c >= dim) return;
    const int32_t buckets = static_cast<int32_t>(gridDim.y),
                  mine = static_cast<int32_t>(blockIdx.y);
    for (int64_t i = 0; i < n; ++i) {
        const int32_t id = ids[i];
        if (!in_range(id, rows)) {
            if (c == 0 && mine == 0) report_error(err, kErrEmbeddingBwdId, id);
        } else if (id % buckets == mine) {
            dtable[static_cast<int64_t>(id) * dim + c] += dout[i * dim + c];
        }
    }
}

void embedding_fwd(Stream s, float* out, const float* table, int64_t table_rows, const int32_t* ids,
                   int64_t n, int64_t dim, bool accumulate, int32_t* err) {
    if (n > 0 && dim > 0)
        MT_LAUNCH(embedding_fwd_kernel, elementwise(n * dim), s, out, table, table_rows, ids, n,
                  dim, accumulate, err);
}

void embedding_bwd(Stream s, float* dtable, int64_t table_rows, const float* dout,
                   const int32_t* ids, int64_t n, int64_t dim, int32_t* err) {
    if (n > 0 && dim > 0)
        MT_LAUNCH(embedding_bwd_kernel, mtk::embedding_bwd(n, dim), s, dtable, table_rows, dout,
                  ids, n, dim, err);
}

}  // namespace mtk
