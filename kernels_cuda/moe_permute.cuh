// MoE token permutation (MODEL.md 2): the stable counting sort of the N*k (token, slot) pairs by
// expert, the row gather, the weighted combine and its backward. The sort runs in three
// kernels over chunks of kSortChunk slots: per-chunk expert histograms (shared-memory integer
// atomics: exact), one block turning them into per-chunk bases (expert offset + earlier
// chunks), and the placement, where each slot's rank among the same expert in its chunk is
// counted in slot order. The result equals the sequential stable counting sort. Out-of-range
// indices (expert, row) are skipped and reported through the device error word.
#pragma once

#include "common.cuh"

namespace mtk {

__global__ void moe_count_kernel(const int32_t* __restrict__ topk_idx, int64_t slots, int E,
                                 int32_t* __restrict__ hist, int32_t* err) {
    int32_t* h = mt_dynamic_shared<int32_t>();
    for (int e = threadIdx.x; e < E; e += blockDim.x) h[e] = 0;
    __syncthreads();
    int64_t slot = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (slot < slots) {
        const int32_t e = topk_idx[slot];
        if (in_range(e, E)) atomicAdd(&h[e], 1);
        else report_error(err, kErrSortExpert, e);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) hist[static_cast<int64_t>(blockIdx.x) * E + e] = h[e];
}

// hist[c][e] (counts) -> base[c][e] = offset[e] + sum_{c' < c} hist[c'][e]; counts[e] = total.
__global__ void moe_scan_kernel(int32_t* __restrict__ hist, int64_t chunks, int E,
                                int32_t* __restrict__ counts) {
    int32_t* offset = mt_dynamic_shared<int32_t>();
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int32_t running = 0;
        for (int64_t c = 0; c < chunks; ++c) {
            int32_t v = hist[c * E + e];
            hist[c * E + e] = running;
            running += v;
        }
        counts[e] = running;
        offset[e] = running;
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // exclusive scan over the experts (E is small)
        int32_t acc = 0;
        for (int e = 0; e < E; ++e) {
            int32_t v = offset[e];
            offset[e] = acc;
            acc += v;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x)
        for (int64_t c = 0; c < chunks; ++c) hist[c * E + e] += offset[e];
}

__global__ void moe_place_kernel(const int32_t* __restrict__ topk_idx, int64_t slots, int k, int E,
                                 const int32_t* __restrict__ base, int32_t* __restrict__ row_token,
                                 int32_t* __restrict__ slot_row) {
    __shared__ int32_t expert[kSortChunk];
    const int64_t slot = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int32_t raw = slot < slots ? topk_idx[slot] : -1;
    const int32_t e = in_range(raw, E) ? raw : -1;  // invalid: reported by moe_count_kernel
    expert[threadIdx.x] = e;
    __syncthreads();
    if (e < 0) return;
    int32_t rank = 0;
    for (unsigned t = 0; t < threadIdx.x; ++t) rank += expert[t] == e;
    const int32_t row = base[static_cast<int64_t>(blockIdx.x) * E + e] + rank;
    slot_row[slot] = row;
    row_token[row] = static_cast<int32_t>(slot / k);
}

__global__ void gather_rows_kernel(float* __restrict__ dst, const float* __restrict__ src,
                                   int64_t src_rows, const int32_t* __restrict__ index, int64_t R,
                                   int64_t dim, int32_t* err) {
    for (int64_t i = global_thread(); i < R * dim; i += grid_threads()) {
        const int64_t r = i / dim, c = i - r * dim;
        const int32_t from = index[r];
        if (!in_range(from, src_rows)) {
            if (c == 0) report_error(err, kErrGatherIndex, from);
            continue;
        }
        dst[i] = src[static_cast<int64_t>(from) * dim + c];
    }
}

// y[n] (+)= sum_j w[n,j] rows[slot_row[n,j]], j in order.
__global__ void moe_combine_kernel(float* __restrict__ y, const float* __restrict__ rows,
                                   int64_t nrows, const int32_t* __restrict__ slot_row,
                                   const float* __restrict__ w, int64_t N, int k, int64_t dim,
                                   bool accumulate, int32_t* err) {
    for (int64_t i = global_thread(); i < N * dim; i += grid_threads()) {
        int64_t n = i / dim, c = i - n * dim;
        float acc = 0.0f;
        for (int j = 0; j < k; ++j) {
            const int32_t row = slot_row[n * k + j];
            if (!in_range(row, nrows)) {
                if (c == 0) report_error(err, kErrCombineRow, row);
                continue;
            }
            acc += (w ? w[n * k + j] : 1.0f) * rows[static_cast<int64_t>(row) * dim + c];
        }
        y[i] = accumulate ? y[i] + acc : acc;
    }
}

// One warp per slot (n, j): drows[row] = w dy[n]; dw[n,j] = dy[n] . rows[row].
__global__ void moe_combine_bwd_kernel(float* __restrict__ drows, float* __restrict__ dw,
                                       const float* __restrict__ dy, const float* __restrict__ rows,
                                       int64_t nrows, const int32_t* __restrict__ slot_row,
                                       const float* __restrict__ w, int64_t slots, int k,
                                       int64_t dim, int32_t* err) {
    const int64_t slot = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp_id();
    if (slot >= slots) return;  // whole warp
    const int64_t n = slot / k, row = slot_row[slot];
    if (!in_range(row, nrows)) {  // whole warp
        if (lane_id() == 0) report_error(err, kErrCombineBwdRow, static_cast<int32_t>(row));
        return;
    }
    const float wj = w ? w[slot] : 1.0f;
    float dot = 0.0f;
    for (int64_t c = lane_id(); c < dim; c += kWarp) {
        float d = dy[n * dim + c];
        drows[row * dim + c] = wj * d;
        dot += d * rows[row * dim + c];
    }
    dot = warp_sum(dot);
    if (dw && lane_id() == 0) dw[slot] = dot;
}

void moe_sort(Stream s, int32_t* counts, int32_t* row_token, int32_t* slot_row,
              const int32_t* topk_idx, int64_t N, int64_t k, int64_t E, int32_t* scratch,
              int32_t* err) {
    const int64_t slots = N * k;
    const int e = static_cast<int>(E);
    if (slots <= 0) {  // no tokens: every expert count is 0
        MT_LAUNCH(moe_scan_kernel, moe_scan(E), s, scratch, int64_t(0), e, counts);
        return;
    }
    MT_LAUNCH(moe_count_kernel, moe_count(slots, E), s, topk_idx, slots, e, scratch, err);
    MT_LAUNCH(moe_scan_kernel, moe_scan(E), s, scratch, moe_sort_chunks(slots), e, counts);
    MT_LAUNCH(moe_place_kernel, moe_place(slots), s, topk_idx, slots, static_cast<int>(k), e,
              scratch, row_token, slot_row);
}

void gather_rows(Stream s, float* dst, const float* src, int64_t src_rows, const int32_t* index,
                 int64_t R, int64_t dim, int32_t* err) {
    if (R > 0 && dim > 0)
        MT_LAUNCH(gather_rows_kernel, elementwise(R * dim), s, dst, src, src_rows, index, R, dim, err);
}

void moe_combine(Stream s, float* y, const float* rows, int64_t nrows, const int32_t* slot_row,
                 const float* w, int64_t N, int64_t k, int64_t dim, bool accumulate, int32_t* err) {
    if (N > 0 && dim > 0)
        MT_LAUNCH(moe_combine_kernel, elementwise(N * dim), s, y, rows, nrows, slot_row, w, N,
                  static_cast<int>(k), dim, accumulate, err);
}

void moe_combine_bwd(Stream s, float* drows, float* dw, const float* dy, const float* rows,
                     int64_t nrows, const int32_t* slot_row, const float* w, int64_t N,
                     int64_t k, int64_t dim, int32_t* err) {
    if (N > 0 && k > 0)
        MT_LAUNCH(moe_combine_bwd_kernel, warp_per_item(N * k), s, drows, dw, dy, rows, nrows,
                  slot_row, w, N * k, static_cast<int>(k), dim, err);
}

}  // namespace mtk
