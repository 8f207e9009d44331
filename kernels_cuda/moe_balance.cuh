// MoE load control (docs/MODEL.md 2): capacity admission of the N*k selections in priority
// order (slot j first, then token n) and the data-parallel shares of its offsets, the
// expert-count accumulator over micro-batches and the float64 expert-bias update. Admission is
// a counting pass like moe_sort's (expert_count.cuh) over the priority order: per-chunk
// histograms, the caller's device-wide exclusive scan giving each (expert, chunk) the
// selections of that expert earlier in the order, then each selection's rank; a selection is
// kept when the selections of its expert before it (plus the other ranks' offsets) are fewer
// than the capacity. Nothing is read back to the host, so the sequence is graph-capturable,
// and every count is an integer: deterministic.
#pragma once

#include "common.cuh"
#include "expert_count.cuh"

namespace mtk {

// kept_idx[slot] = e if offsets[j][e] + rank < capacity, else -1, for the selection at
// priority position i (slot = n*k + j, e its expert, rank = the selections of e before it);
// block 0 also writes counts[e] = every selection of e (before dropping).
__global__ void moe_capacity_admit_kernel(const int32_t* __restrict__ topk_idx, int64_t N, int k,
                                          int E, const int32_t* __restrict__ hist,
                                          const int32_t* __restrict__ base, int64_t chunks,
                                          const int32_t* __restrict__ offsets, int64_t capacity,
                                          int32_t* __restrict__ kept_idx,
                                          int32_t* __restrict__ counts) {
    __shared__ int32_t expert[kSortChunk];
    if (blockIdx.x == 0)
        for (int e = threadIdx.x; e < E; e += blockDim.x)
            counts[e] = expert_total(hist, base, chunks, e);
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t slot = i < N * k ? slot_at<true>(i, N, k) : -1;
    const int32_t raw = slot >= 0 ? topk_idx[slot] : -1;
    const int32_t e = in_range(raw, E) ? raw : -1;  // invalid: reported by expert_hist_kernel
    expert[threadIdx.x] = e;
    __syncthreads();
    if (slot < 0) return;
    if (e < 0) {
        kept_idx[slot] = -1;
        return;
    }
    // The scan runs over every expert in order: e's selections before this chunk are its base
    // here minus its base at chunk 0.
    const int64_t j = i / N, first = static_cast<int64_t>(e) * gridDim.x;
    const int64_t before = (offsets ? offsets[j * E + e] : 0) + base[first + blockIdx.x] -
                           base[first] + rank_in_chunk(expert, e);
    kept_idx[slot] = before < capacity ? e : -1;
}

// shares[q][j][e] = (q != rank ? this rank's selections of e in slots j' < j : 0) + (rank < q ?
// those in slot j : 0), for q < ranks. One block per expert e: each slot's count is a block
// reduction over the tokens (integers: the order does not matter).
__global__ void moe_capacity_shares_kernel(int32_t* __restrict__ shares,
                                           const int32_t* __restrict__ topk_idx, int64_t N, int k,
                                           int E, int64_t rank, int64_t ranks, int32_t* err) {
    const int e = static_cast<int>(blockIdx.x);
    int32_t higher = 0;
    for (int j = 0; j < k; ++j) {
        int32_t c = 0;
        for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
            const int32_t x = topk_idx[n * k + j];
            c += x == e;
            if (e == 0 && !in_range(x, E)) report_error(err, kErrCapacityExpert, x);
        }
        c = block_reduce(c, AddOp{}, 0);
        for (int64_t q = threadIdx.x; q < ranks; q += blockDim.x)
            shares[(q * k + j) * E + e] = (q != rank ? higher : 0) + (rank < q ? c : 0);
        higher += c;
    }
}

__global__ void add_counts_kernel(int32_t* __restrict__ acc, const int32_t* __restrict__ counts,
                                  int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) acc[i] += counts[i];
}

// b_e = fp32(double(b_e) + rate * sign(c_mean - c_e)), c_mean = sum_e c_e / E in float64, the
// sum exact in int64 (thread 0, then the block reads it); one block.
__global__ void expert_bias_update_kernel(float* __restrict__ bias,
                                          const int32_t* __restrict__ counts, int E, double rate) {
    __shared__ int64_t total;
    if (threadIdx.x == 0) {
        int64_t t = 0;
        for (int e = 0; e < E; ++e) t += counts[e];
        total = t;
    }
    __syncthreads();
    const double mean = static_cast<double>(total) / static_cast<double>(E);
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        const double d = mean - static_cast<double>(counts[e]);
        const double sign = d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0);
        bias[e] = static_cast<float>(static_cast<double>(bias[e]) + rate * sign);
    }
}

// E <= kMaxExperts; offsets (k x E) may be nullptr (all 0). scan_temp_bytes =
// scan.temp_bytes(moe_sort_scan_items(N*k, E)); scratch (256-byte aligned):
// moe_sort_scratch_bytes(N*k, E, scan_temp_bytes), the same layout as moe_sort's.
void moe_capacity(Stream s, int32_t* kept_idx, int32_t* counts, const int32_t* topk_idx,
                  const int32_t* offsets, int64_t N, int64_t k, int64_t E, int64_t capacity,
                  const ExclusiveScan& scan, size_t scan_temp_bytes, void* scratch, int32_t* err) {
    const int64_t slots = N * k, chunks = moe_sort_chunks(slots);
    const int e = static_cast<int>(E);
    const auto [hist, base] = count_expert_chunks<true>(
        s, topk_idx, N, k, E, false, kErrCapacityExpert, scan, scan_temp_bytes, scratch, err);
    // No selections: one block writes the zero counts (chunks = 0).
    MT_LAUNCH(moe_capacity_admit_kernel, moe_place(slots > 0 ? slots : 1), s, topk_idx, N,
              static_cast<int>(k), e, hist, base, chunks, offsets, capacity, kept_idx, counts);
}

// shares: ranks x k x E (moe_capacity_shares_kernel); E <= INT_MAX.
void moe_capacity_shares(Stream s, int32_t* shares, const int32_t* topk_idx, int64_t N, int64_t k,
                         int64_t E, int64_t rank, int64_t ranks, int32_t* err) {
    MT_LAUNCH(moe_capacity_shares_kernel, moe_capacity_shares(E), s, shares, topk_idx, N,
              static_cast<int>(k), static_cast<int>(E), rank, ranks, err);
}

void add_counts(Stream s, int32_t* acc, const int32_t* counts, int64_t n) {
    if (n > 0) MT_LAUNCH(add_counts_kernel, elementwise(n), s, acc, counts, n);
}

void expert_bias_update(Stream s, float* bias, const int32_t* counts, int64_t E, double rate) {
    if (E > 0)
        MT_LAUNCH(expert_bias_update_kernel, one_block(), s, bias, counts, static_cast<int>(E),
                  rate);
}

}  // namespace mtk
