// The per-chunk expert histogram of the N*k selections that both MoE counting passes start
// from: moe_sort (moe_permute.cuh) walks the selections in slot order s = n*k + j, moe_capacity
// (moe_balance.cuh) in priority order i = j*N + n (slot j first, then token n). Chunks of
// kSortChunk positions of that order; hist[e][chunk] expert-major, so one exclusive scan of it
// gives each (expert, chunk) the number of earlier selections of that expert. Templates and
// inline functions only: both family headers include it.
#pragma once

#include "common.cuh"

namespace mtk {

// The slot n*k + j at position i of the walk: slot order, or priority order (kPriority).
template <bool kPriority>
__device__ __forceinline__ int64_t slot_at(int64_t i, int64_t N, int k) {
    return kPriority ? (i % N) * k + i / N : i;
}

// hist[e][chunk] (chunks = gridDim.x) = positions of the chunk whose selection is expert e.
// An index outside [0, E) is skipped; it is reported as `code` unless it is -1 and
// dropped_ok (a selection moe_capacity dropped).
template <bool kPriority>
__global__ void expert_hist_kernel(const int32_t* __restrict__ topk_idx, int64_t N, int k, int E,
                                   int32_t* __restrict__ hist, bool dropped_ok, int32_t code,
                                   int32_t* err) {
    int32_t* h = mt_dynamic_shared<int32_t>();
    for (int e = threadIdx.x; e < E; e += blockDim.x) h[e] = 0;
    __syncthreads();
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < N * k) {
        const int32_t e = topk_idx[slot_at<kPriority>(i, N, k)];
        if (in_range(e, E))
            atomicAdd(&h[e], 1);
        else if (!(dropped_ok && e == -1))
            report_error(err, code, e);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x)
        hist[static_cast<int64_t>(e) * gridDim.x + blockIdx.x] = h[e];
}

// Expert e's total over all chunks: its last chunk's base + count - its first chunk's base (0
// without chunks).
__device__ __forceinline__ int32_t expert_total(const int32_t* hist, const int32_t* base,
                                                int64_t chunks, int64_t e) {
    const int64_t last = e * chunks + chunks - 1;
    return chunks > 0 ? base[last] + hist[last] - base[e * chunks] : 0;
}

// Rank of the calling thread's expert e among the earlier threads of its block (the block's
// positions in order), from the block's experts in shared memory.
__device__ __forceinline__ int32_t rank_in_chunk(const int32_t* expert, int32_t e) {
    int32_t rank = 0;
    for (unsigned t = 0; t < threadIdx.x; ++t) rank += expert[t] == e;
    return rank;
}

// The start of moe_sort and moe_capacity in their scratch (launch.h moe_sort_scratch_bytes):
// hist[e][chunk] of the selections (expert_hist_kernel<kPriority>), then base, its exclusive
// scan, then the scan's temporary. Launches nothing without selections.
struct ExpertChunks {
    int32_t* hist;
    int32_t* base;
};
template <bool kPriority>
ExpertChunks count_expert_chunks(Stream s, const int32_t* topk_idx, int64_t N, int64_t k, int64_t E,
                                 bool dropped_ok, int32_t code, const ExclusiveScan& scan,
                                 size_t scan_temp_bytes, void* scratch, int32_t* err) {
    const int64_t slots = N * k;
    const size_t hist_bytes = moe_sort_hist_bytes(slots, E);
    const ExpertChunks c{static_cast<int32_t*>(scratch),
                         reinterpret_cast<int32_t*>(static_cast<char*>(scratch) + hist_bytes)};
    if (slots > 0) {
        MT_LAUNCH(expert_hist_kernel<kPriority>, moe_count(slots, E), s, topk_idx, N,
                  static_cast<int>(k), static_cast<int>(E), c.hist, dropped_ok, code, err);
        scan.run(s, c.hist, c.base, moe_sort_scan_items(slots, E),
                 static_cast<char*>(scratch) + 2 * hist_bytes, scan_temp_bytes);
    }
    return c;
}

}  // namespace mtk
