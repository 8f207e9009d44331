// MoE token permutation (MODEL.md 2): the stable counting sort of the N*k (token, slot) pairs by
// expert, the row gather, the weighted combine and its backward. The sort works on chunks of
// kSortChunk slots: per-chunk expert histograms (shared-memory integer atomics: exact) laid
// out expert-major [E][chunks], one device-wide exclusive scan of them (the ExclusiveScan the
// caller passes: cub in the backend) giving each (expert, chunk) its first sorted row, the
// expert counts from the scan, and the placement, where each slot's rank among the same
// expert in its chunk is counted in slot order. The result equals the sequential stable
// counting sort. A selection dropped by capacity (expert -1, moe_balance.cuh) gets no row:
// slot_row -1, skipped by the combine and its backward. Other out-of-range indices (expert,
// row) are skipped and reported through the device error word.
#pragma once

#include "common.cuh"
#include "expert_count.cuh"
#include "vector_access.cuh"

namespace mtk {

// counts[e] = (base + count of expert e's last chunk) - base of its first chunk, where base is
// the exclusive scan of hist (0 when there are no chunks, i.e. no tokens).
__global__ void moe_counts_kernel(const int32_t* __restrict__ hist,
                                  const int32_t* __restrict__ base, int64_t chunks, int E,
                                  int32_t* __restrict__ counts) {
    for (int64_t e = global_thread(); e < E; e += grid_threads())
        counts[e] = expert_total(hist, base, chunks, e);
}

// row_token[r] = 0 for the rows r in [total, slots) no expert owns (total = the admitted
// selections, < slots only when some were dropped): a valid token that is never combined.
// total = the last histogram entry's base + count (the scan runs over every expert in order).
__global__ void moe_unowned_rows_kernel(const int32_t* __restrict__ hist,
                                        const int32_t* __restrict__ base, int64_t items,
                                        int64_t slots, int32_t* __restrict__ row_token) {
    const int64_t total = base[items - 1] + hist[items - 1];
    for (int64_t r = total + global_thread(); r < slots; r += grid_threads()) row_token[r] = 0;
}

__global__ void moe_place_kernel(const int32_t* __restrict__ topk_idx, int64_t slots, int k, int E,
                                 const int32_t* __restrict__ base, int32_t* __restrict__ row_token,
                                 int32_t* __restrict__ slot_row) {
    __shared__ int32_t expert[kSortChunk];
    const int64_t slot = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int32_t raw = slot < slots ? topk_idx[slot] : -1;
    const int32_t e = in_range(raw, E) ? raw : -1;  // invalid: reported by expert_hist_kernel
    expert[threadIdx.x] = e;
    __syncthreads();
    if (e < 0) {
        if (slot < slots) slot_row[slot] = -1;  // dropped (or invalid): no row
        return;
    }
    const int32_t row =
        base[static_cast<int64_t>(e) * gridDim.x + blockIdx.x] + rank_in_chunk(expert, e);
    slot_row[slot] = row;
    row_token[row] = static_cast<int32_t>(slot / k);
}

// dst[r] = src[index[r]], rows of dim elements accessed W at a time (W = 4: every row of dst
// and src starts 16-byte aligned).
template <int W>
__device__ __forceinline__ void gather_rows_by(Width<W> vw, float* __restrict__ dst,
                                               const float* __restrict__ src, int64_t src_rows,
                                               const int32_t* __restrict__ index, int64_t R,
                                               int64_t dim, int32_t* err) {
    const int64_t per_row = dim / W;
    for (int64_t i = global_thread(); i < R * per_row; i += grid_threads()) {
        const int64_t r = i / per_row, c = (i - r * per_row) * W;
        const int32_t from = index[r];
        if (!in_range(from, src_rows)) {
            if (c == 0) report_error(err, kErrGatherIndex, from);
            continue;
        }
        store_lanes(vw, dst + r * dim + c,
                    load_lanes(vw, src + static_cast<int64_t>(from) * dim + c));
    }
}
__global__ void gather_rows_kernel(float* __restrict__ dst, const float* __restrict__ src,
                                   int64_t src_rows, const int32_t* __restrict__ index, int64_t R,
                                   int64_t dim, bool vec4, int32_t* err) {
    if (vec4)
        gather_rows_by(Width<4>{}, dst, src, src_rows, index, R, dim, err);
    else
        gather_rows_by(Width<1>{}, dst, src, src_rows, index, R, dim, err);
}

// y[n] (+)= sum_j weight[n,j] rows[slot_row[n,j]], j in order; W elements of a row at a time
// (W = 4: every row of y and rows starts 16-byte aligned).
template <int W>
__device__ __forceinline__ void moe_combine_by(Width<W> vw, float* __restrict__ y,
                                               const float* __restrict__ rows, int64_t nrows,
                                               const int32_t* __restrict__ slot_row,
                                               const float* __restrict__ weight, int64_t N, int k,
                                               int64_t dim, bool accumulate, int32_t* err) {
    const int64_t per_row = dim / W;
    for (int64_t i = global_thread(); i < N * per_row; i += grid_threads()) {
        const int64_t n = i / per_row, c = (i - n * per_row) * W;
        Lanes<float, W> acc{};
        for (int j = 0; j < k; ++j) {
            const int32_t row = slot_row[n * k + j];
            if (!in_range(row, nrows)) {  // -1: a dropped selection, skipped silently
                if (c == 0 && row != -1) report_error(err, kErrCombineRow, row);
                continue;
            }
            const float wj = weight ? weight[n * k + j] : 1.0f;
            const auto r = load_lanes(vw, rows + static_cast<int64_t>(row) * dim + c);
            for (int u = 0; u < W; ++u) acc[u] += wj * r[u];
        }
        if (accumulate) {
            const auto old = load_lanes(vw, y + n * dim + c);
            for (int u = 0; u < W; ++u) acc[u] = old[u] + acc[u];
        }
        store_lanes(vw, y + n * dim + c, acc);
    }
}
__global__ void moe_combine_kernel(float* __restrict__ y, const float* __restrict__ rows,
                                   int64_t nrows, const int32_t* __restrict__ slot_row,
                                   const float* __restrict__ w, int64_t N, int k, int64_t dim,
                                   bool accumulate, bool vec4, int32_t* err) {
    if (vec4)
        moe_combine_by(Width<4>{}, y, rows, nrows, slot_row, w, N, k, dim, accumulate, err);
    else
        moe_combine_by(Width<1>{}, y, rows, nrows, slot_row, w, N, k, dim, accumulate, err);
}

// One warp per slot (n, j): drows[row] = w dy[n]; dw[n,j] = dy[n] . rows[row]. Left scalar:
// the lanes' strided partial dot products fix the summation order.
__global__ void moe_combine_bwd_kernel(float* __restrict__ drows, float* __restrict__ dw,
                                       const float* __restrict__ dy, const float* __restrict__ rows,
                                       int64_t nrows, const int32_t* __restrict__ slot_row,
                                       const float* __restrict__ w, int64_t slots, int k,
                                       int64_t dim, int32_t* err) {
    const int64_t slot = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp_id();
    if (slot >= slots) return;  // whole warp
    const int64_t n = slot / k, row = slot_row[slot];
    if (row == -1) {  // a dropped selection: no row, no weight gradient (whole warp)
        if (dw && lane_id() == 0) dw[slot] = 0.0f;
        return;
    }
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

// E <= kMaxExperts.
// scan_temp_bytes = scan.temp_bytes(moe_sort_scan_items(N*k, E)); scratch (256-byte
// aligned): moe_sort_scratch_bytes(N*k, E, scan_temp_bytes).
void moe_sort(Stream s, int32_t* counts, int32_t* row_token, int32_t* slot_row,
              const int32_t* topk_idx, int64_t N, int64_t k, int64_t E, const ExclusiveScan& scan,
              size_t scan_temp_bytes, void* scratch, int32_t* err) {
    const int64_t slots = N * k, chunks = moe_sort_chunks(slots);
    const int64_t items = moe_sort_scan_items(slots, E);
    const int e = static_cast<int>(E);
    const auto [hist, base] = count_expert_chunks<false>(s, topk_idx, N, k, E, true, kErrSortExpert,
                                                         scan, scan_temp_bytes, scratch, err);
    // No tokens: chunks = 0 and every count is 0.
    MT_LAUNCH(moe_counts_kernel, moe_counts(E), s, hist, base, chunks, e, counts);
    if (slots > 0) {
        MT_LAUNCH(moe_place_kernel, moe_place(slots), s, topk_idx, slots, static_cast<int>(k), e,
                  base, row_token, slot_row);
        MT_LAUNCH(moe_unowned_rows_kernel, elementwise(slots), s, hist, base, items, slots,
                  row_token);
    }
}

void gather_rows(Stream s, float* dst, const float* src, int64_t src_rows, const int32_t* index,
                 int64_t R, int64_t dim, int32_t* err) {
    if (R <= 0 || dim <= 0) return;
    const bool vec4 = rows_vectorisable(dim, dst, src);
    MT_LAUNCH(gather_rows_kernel, elementwise(R * dim / (vec4 ? 4 : 1)), s, dst, src, src_rows,
              index, R, dim, vec4, err);
}

// w may be nullptr (all weights 1); rows has nrows rows of dim.
void moe_combine(Stream s, float* y, const float* rows, int64_t nrows, const int32_t* slot_row,
                 const float* w, int64_t N, int64_t k, int64_t dim, bool accumulate, int32_t* err) {
    if (N <= 0 || dim <= 0) return;
    const bool vec4 = rows_vectorisable(dim, y, rows);
    MT_LAUNCH(moe_combine_kernel, elementwise(N * dim / (vec4 ? 4 : 1)), s, y, rows, nrows,
              slot_row, w, N, static_cast<int>(k), dim, accumulate, vec4, err);
}

// dw and w may be nullptr; drows and rows have nrows rows of dim.
void moe_combine_bwd(Stream s, float* drows, float* dw, const float* dy, const float* rows,
                     int64_t nrows, const int32_t* slot_row, const float* w, int64_t N, int64_t k,
                     int64_t dim, int32_t* err) {
    if (N > 0 && k > 0)
        MT_LAUNCH(moe_combine_bwd_kernel, warp_per_item(N * k), s, drows, dw, dy, rows, nrows,
                  slot_row, w, N * k, static_cast<int>(k), dim, err);
}

}  // namespace mtk
