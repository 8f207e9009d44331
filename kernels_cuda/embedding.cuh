// Embedding lookup and its gradient (ids outside the table are skipped and reported). The
// backward pass is deterministic without atomics and reads dout once (docs/CUDA.md, "Embedding
// backward"): the token indices are stably sorted by id (the caller's device-wide radix sort, cub
// in the backend), so equal ids form runs in token order; each block sums the rows of
// kEmbeddingChunk sorted tokens run by run, adding a run that lies inside its chunk straight into
// dtable and leaving the part of a run that crosses a chunk edge as a partial row; a second
// kernel adds each crossing run's partial rows, chunk by chunk, into dtable.
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

// Sort keys: the id, or `rows` for an id outside the table (reported; sorted after every valid
// id and skipped); values: the token indices.
__global__ void embedding_bwd_keys_kernel(int32_t* __restrict__ keys, int32_t* __restrict__ toks,
                                          int64_t rows, const int32_t* __restrict__ ids, int64_t n,
                                          int32_t* err) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        const int32_t id = ids[i];
        const bool valid = in_range(id, rows);
        if (!valid) report_error(err, kErrEmbeddingBwdId, id);
        keys[i] = valid ? id : static_cast<int32_t>(rows);
        toks[i] = static_cast<int32_t>(i);
    }
}

// Tokens read ahead of the run logic (their loads are independent: every sorted token index is in
// [0, n), so rows of skipped ids are read but never added).
constexpr int kEmbeddingAhead = 8;

// Block (x: chunk of sorted tokens, y: columns): sums each run of equal keys in the chunk in
// sorted (= token) order. A run inside the chunk is added into dtable; the segment of a run that
// began in an earlier chunk goes to the chunk's head partial row, that of a run beginning here and
// going on into the next chunk to its tail row (embedding_bwd_runs_kernel adds them up).
__global__ void embedding_bwd_chunk_kernel(float* __restrict__ dtable, int64_t rows,
                                           const float* __restrict__ dout,
                                           const int32_t* __restrict__ keys,
                                           const int32_t* __restrict__ toks, int64_t n, int64_t dim,
                                           float* __restrict__ partial) {
    // key[0]: the key before the chunk, key[1 + i]: its tokens', key[1 + len]: the key after it
    // (-1 at either end of the sorted tokens: no valid key).
    __shared__ int32_t key[kEmbeddingChunk + 2];
    __shared__ int32_t tok[kEmbeddingChunk];
    const int64_t chunk = blockIdx.x, begin = chunk * kEmbeddingChunk;
    const int len = static_cast<int>(n - begin < kEmbeddingChunk ? n - begin : kEmbeddingChunk);
    for (int i = static_cast<int>(threadIdx.x); i < len + 2; i += static_cast<int>(blockDim.x)) {
        const int64_t p = begin + i - 1;
        key[i] = p >= 0 && p < n ? keys[p] : -1;
        if (i >= 1 && i <= len) tok[i - 1] = toks[p];
    }
    __syncthreads();
    float* head = partial + 2 * chunk * dim;
    float* tail = head + dim;
    for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < dim;
         c += static_cast<int64_t>(gridDim.y) * blockDim.x) {
        float acc = 0.0f;
        int first = 0;  // where the current run starts in the chunk
        for (int i0 = 0; i0 < len; i0 += kEmbeddingAhead) {
            float v[kEmbeddingAhead];
            for (int u = 0; u < kEmbeddingAhead; ++u)
                v[u] = i0 + u < len ? dout[static_cast<int64_t>(tok[i0 + u]) * dim + c] : 0.0f;
            for (int u = 0; u < kEmbeddingAhead && i0 + u < len; ++u) {
                const int i = i0 + u;
                const int32_t k = key[1 + i];
                if (k >= rows) break;  // an id outside the table: so are the rest
                acc += v[u];
                if (i + 1 < len && key[2 + i] == k) continue;  // the run goes on in the chunk
                const bool from_before = first == 0 && key[0] == k;
                const bool into_next = i + 1 == len && key[1 + len] == k;
                if (from_before)
                    head[c] = acc;
                else if (into_next)
                    tail[c] = acc;
                else
                    dtable[static_cast<int64_t>(k) * dim + c] += acc;
                acc = 0.0f;
                first = i + 1;
            }
        }
    }
}

// Block (x: chunk, y: columns): if a run of valid keys begins in this chunk and goes on into the
// next, adds its tail partial row and the head partial rows of the chunks it covers, in chunk
// order, into dtable.
__global__ void embedding_bwd_runs_kernel(float* __restrict__ dtable, int64_t rows,
                                          const int32_t* __restrict__ keys, int64_t n, int64_t dim,
                                          const float* __restrict__ partial) {
    const int64_t chunk = blockIdx.x, begin = chunk * kEmbeddingChunk;
    const int64_t end = begin + kEmbeddingChunk;
    if (end >= n) return;  // the last chunk: nothing goes on past it
    const int32_t k = keys[end - 1];
    if (k >= rows || keys[end] != k || (begin > 0 && keys[begin - 1] == k)) return;
    int64_t last = chunk + 1;  // the chunk the run ends in
    while ((last + 1) * kEmbeddingChunk < n && keys[(last + 1) * kEmbeddingChunk] == k) ++last;
    for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < dim;
         c += static_cast<int64_t>(gridDim.y) * blockDim.x) {
        float total = partial[(2 * chunk + 1) * dim + c];
        for (int64_t j = chunk + 1; j <= last; ++j) total += partial[2 * j * dim + c];
        dtable[static_cast<int64_t>(k) * dim + c] += total;
    }
}

void embedding_fwd(Stream s, float* out, const float* table, int64_t table_rows, const int32_t* ids,
                   int64_t n, int64_t dim, bool accumulate, int32_t* err) {
    if (n > 0 && dim > 0)
        MT_LAUNCH(embedding_fwd_kernel, elementwise(n * dim), s, out, table, table_rows, ids, n,
                  dim, accumulate, err);
}

// dtable[ids[t]] += dout[t] for every token t with a valid id; n <= INT32_MAX, rows < INT32_MAX.
// sort_temp_bytes = sort.temp_bytes(n, embedding_key_bits(rows)); scratch (256-byte aligned):
// embedding_bwd_scratch_bytes(n, dim, sort_temp_bytes) (launch.h).
void embedding_bwd(Stream s, float* dtable, int64_t table_rows, const float* dout,
                   const int32_t* ids, int64_t n, int64_t dim, const RadixSortPairs& sort,
                   size_t sort_temp_bytes, void* scratch, int32_t* err) {
    if (n <= 0 || dim <= 0) return;
    const size_t index_bytes = embedding_index_bytes(n);
    char* at = static_cast<char*>(scratch);
    auto take = [&at](size_t bytes) {
        char* p = at;
        at += bytes;
        return p;
    };
    auto* keys = reinterpret_cast<int32_t*>(take(index_bytes));
    auto* toks = reinterpret_cast<int32_t*>(take(index_bytes));
    auto* sorted_keys = reinterpret_cast<int32_t*>(take(index_bytes));
    auto* sorted_toks = reinterpret_cast<int32_t*>(take(index_bytes));
    auto* partial = reinterpret_cast<float*>(take(embedding_partial_bytes(n, dim)));
    MT_LAUNCH(embedding_bwd_keys_kernel, elementwise(n), s, keys, toks, table_rows, ids, n, err);
    sort.run(s, keys, sorted_keys, toks, sorted_toks, n, embedding_key_bits(table_rows), at,
             sort_temp_bytes);
    const Geom g = mtk::embedding_bwd_chunks(n, dim);
    MT_LAUNCH(embedding_bwd_chunk_kernel, g, s, dtable, table_rows, dout, sorted_keys, sorted_toks,
              n, dim, partial);
    MT_LAUNCH(embedding_bwd_runs_kernel, g, s, dtable, table_rows, sorted_keys, n, dim, partial);
}

}  // namespace mtk
