// Token sampling (MODEL.md 7), one block per row. Greedy: a block argmax, ties to the lower id.
// Otherwise: p = softmax(logits / temperature); the row's (p, id) pairs are packed into 64-bit
// keys (unique: the id is in the low half) that sort ascending as (p descending, id ascending);
// top-k cuts the sorted prefix, top-p keeps the shortest prefix whose cumulative p reaches
// top_p; the Philox uniform u of (seed, step + uint32(step_dev[0]), row) then picks the first
// kept id whose cumulative renormalised probability exceeds u. Prefix sums are block scans in
// double.
// Which keys get sorted: a radix select finds the kSampleFast-th smallest key (or the top_k-th
// when smaller), the keys up to it are gathered into shared memory and bitonic-sorted there.
// That sorted prefix decides the draw when the kept set lies inside it (top-k <= kSampleFast, or
// the nucleus reached within it), or, without top-p, when u falls inside the prefix's share of
// the kept probability (the kept total summed over the row in index order). Otherwise (a nucleus
// wider than kSampleFast tokens, a draw in the tail) the whole row is bitonic-sorted in its
// scratch. Both sort the same unique keys, so the kept prefix, hence the draw, is the same up
// to the rounding of the sums.
#pragma once

#include "common.cuh"

namespace mtk {

struct SampleParams {
    float temperature = 0;
    int64_t top_k = 0;
    float top_p = 1.0f;
    uint64_t seed = 0, step = 0;
    const int32_t* step_dev = nullptr;  // added to step as uint32 (moetrain::SampleArgs)
};

// Monotone map of a float to uint32 (larger float -> larger integer).
__device__ __forceinline__ uint32_t float_order(float f) {
    uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
// Sort key of probability p (>= 0) and id: ascending key = descending p, then ascending id.
__device__ __forceinline__ uint64_t prob_key(float p, int64_t id) {
    return (static_cast<uint64_t>(~__float_as_uint(p)) << 32) | static_cast<uint64_t>(id);
}
__device__ __forceinline__ float key_prob(uint64_t key) {
    return __uint_as_float(~static_cast<uint32_t>(key >> 32));
}

struct MaxU64 {
    __device__ __forceinline__ unsigned long long operator()(unsigned long long a,
                                                             unsigned long long b) const {
        return a > b ? a : b;
    }
};
struct MinI64 {
    __device__ __forceinline__ long long operator()(long long a, long long b) const {
        return a < b ? a : b;
    }
};

// First i in [0, count) whose inclusive prefix sum of key_prob(keys[j]) / divisor is >= thr
// (or > thr when strict); count when none. All threads get the answer and, in *total, the same
// full sum.
__device__ int64_t block_prefix_find(const uint64_t* keys, int64_t count, double divisor,
                                     double thr, bool strict, double* total) {
    __shared__ double part[kSampleBlock];
    const int64_t chunk = (count + blockDim.x - 1) / blockDim.x;
    const int64_t begin = threadIdx.x * chunk;
    const int64_t end = begin + chunk < count ? begin + chunk : count;
    double local = 0.0;
    for (int64_t i = begin; i < end; ++i) local += static_cast<double>(key_prob(keys[i])) / divisor;
    __syncthreads();  // part[] is free (an earlier call may still be reading it)
    part[threadIdx.x] = local;
    __syncthreads();
    double before = 0.0, all = 0.0;  // exclusive prefix of this chunk; the total (same order
    for (unsigned t = 0; t < blockDim.x; ++t) {  // in every thread, so every thread agrees)
        if (t == threadIdx.x) before = all;
        all += part[t];
    }
    *total = all;
    long long found = count;
    double run = before;
    for (int64_t i = begin; i < end; ++i) {
        run += static_cast<double>(key_prob(keys[i])) / divisor;
        if (strict ? run > thr : run >= thr) {
            found = i;
            break;
        }
    }
    return block_reduce(found, MinI64{}, static_cast<long long>(count));
}

// The rank-th smallest (1-based, rank <= n) of n unique keys, by radix select on 8-bit digits
// from the top: each pass counts the next digit of the keys that share the digits chosen so far
// (shared-memory integer counts: exact whatever the order), then thread 0 takes the digit where
// the running count reaches the rank still wanted. Once the taken bucket lies wholly inside the
// rank its lower bits cannot matter: the answer is the bucket's largest possible key (every key
// of it is kept). Every thread gets the answer.
__device__ uint64_t block_select_key(const uint64_t* keys, int64_t n, int64_t rank) {
    __shared__ int hist[256];
    __shared__ unsigned long long chosen;
    __shared__ long long wanted;
    __shared__ int done;
    if (threadIdx.x == 0) {
        chosen = 0;
        wanted = rank;
        done = 0;
    }
    for (int shift = 56; shift >= 0; shift -= 8) {
        __syncthreads();  // the previous pass's choice is visible, hist is free
        if (done) break;  // block-uniform
        for (unsigned i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        const uint64_t prefix = chosen;
        // Whole warps every round: most keys share their leading digits (probabilities of one
        // binade), so the lanes with the first counted lane's digit add as one atomic.
        for (int64_t base = 0; base < n; base += blockDim.x) {
            const int64_t i = base + threadIdx.x;
            int digit = -1;
            if (i < n) {
                const uint64_t key = keys[i];
                if (shift == 56 || (key >> (shift + 8)) == (prefix >> (shift + 8)))
                    digit = static_cast<int>((key >> shift) & 0xff);
            }
            const unsigned counted = __ballot_sync(kFullMask, digit >= 0);
            if (counted == 0) continue;  // warp-uniform
            const int lead = __shfl_sync(kFullMask, digit, __ffs(static_cast<int>(counted)) - 1);
            const unsigned same = __ballot_sync(kFullMask, digit == lead);
            if (digit >= 0 && digit != lead) atomicAdd(&hist[digit], 1);
            if (lane_id() == static_cast<unsigned>(__ffs(static_cast<int>(same)) - 1))
                atomicAdd(&hist[lead], __popc(same));
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            long long r = wanted;
            int d = 0;
            while (d < 255 && hist[d] < r) r -= hist[d++];
            chosen = prefix | (static_cast<uint64_t>(d) << shift);
            wanted = r;
            if (r >= hist[d]) {  // the whole bucket is kept
                chosen |= (uint64_t{1} << shift) - 1;
                done = 1;
            }
        }
    }
    __syncthreads();
    const uint64_t answer = chosen;
    __syncthreads();  // every thread has read it before a next call resets it
    return answer;
}

// Sorts n keys ascending in place (n a power of 2; global or shared memory), every thread of
// the block taking part.
__device__ void block_bitonic_sort(uint64_t* keys, int64_t n) {
    for (int64_t k = 2; k <= n; k <<= 1) {
        for (int64_t j = k >> 1; j > 0; j >>= 1) {
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                const int64_t ixj = i ^ j;
                if (ixj <= i) continue;
                const uint64_t a = keys[i], b = keys[ixj];
                if ((a > b) == ((i & k) == 0)) {
                    keys[i] = b;
                    keys[ixj] = a;
                }
            }
            __syncthreads();
        }
    }
}

// The row's Philox uniform u of (seed, step + uint32(step_dev[0]), row).
__device__ double draw_uniform(const SampleParams& sp) {
    const uint64_t step = sp.step + (sp.step_dev ? static_cast<uint32_t>(*sp.step_dev) : 0u);
    return mt_philox_uniform(sp.seed, step, blockIdx.x);
}

// The drawn id among the first `keep` sorted keys (every thread gets it).
__device__ int32_t draw_kept(const uint64_t* sorted, int64_t keep, const SampleParams& sp) {
    double total = 0.0;
    block_prefix_find(sorted, keep, 1.0, 2.0, false, &total);  // total of the kept probabilities
    int64_t pick = block_prefix_find(sorted, keep, total, draw_uniform(sp), true, &total);
    if (pick >= keep) pick = keep - 1;
    return static_cast<int32_t>(sorted[pick] & 0xffffffffull);
}

// How many sorted keys are kept: the shortest prefix of the first `count` whose cumulative
// probability reaches top_p, or `keep` when there is no top-p or it is not reached within them.
// Every thread of the block must call it (block scans); every thread gets the answer.
__device__ int64_t top_p_keep(const uint64_t* sorted, int64_t count, int64_t keep,
                              const SampleParams& sp) {
    if (sp.top_p < 1.0f) {
        double total = 0.0;
        const int64_t cut =
            block_prefix_find(sorted, count, 1.0, static_cast<double>(sp.top_p), false, &total);
        if (cut < count) keep = cut + 1;
    }
    return keep;
}

// The fast path: the draw from a sorted prefix in shared memory. The min(need, kSampleFast) most
// probable of the row's V keys (need: top-k, else V) are radix-selected, gathered and sorted
// there; they decide the draw when the kept set lies among them, or, without top-p, when u falls
// inside their share of the kept probability. Then thread 0 writes the drawn id to
// out_ids[blockIdx.x] and every thread gets true; false (block-uniform) leaves the draw to the
// whole-row sort. Every thread of the block must call it (block scans and barriers).
__device__ bool draw_in_sorted_prefix(int32_t* out_ids, const uint64_t* keys, int64_t V,
                                      int64_t need, const SampleParams& sp) {
    __shared__ uint64_t fast[kSampleFast];
    __shared__ int filled;
    const int64_t cand = need < kSampleFast ? need : kSampleFast;
    const uint64_t last = block_select_key(keys, V, cand);
    if (threadIdx.x == 0) filled = 0;
    __syncthreads();
    // Exactly cand keys are <= last; their slots depend on the schedule, the sort does not.
    // One atomic per warp and round: the first taking lane reserves the warp's slots.
    for (int64_t base = 0; base < V; base += blockDim.x) {
        const int64_t i = base + threadIdx.x;
        const uint64_t key = i < V ? keys[i] : ~0ull;
        const bool take = i < V && key <= last;
        const unsigned takers = __ballot_sync(kFullMask, take);
        if (takers == 0) continue;  // warp-uniform
        const int first = __ffs(static_cast<int>(takers)) - 1;
        int slot = 0;
        if (static_cast<int>(lane_id()) == first) slot = atomicAdd(&filled, __popc(takers));
        slot = __shfl_sync(kFullMask, slot, first) + __popc(takers & ((1u << lane_id()) - 1u));
        if (take) fast[slot] = key;
    }
    int64_t n = 1;
    while (n < cand) n <<= 1;
    for (int64_t i = cand + threadIdx.x; i < n; i += blockDim.x) fast[i] = ~0ull;
    __syncthreads();
    block_bitonic_sort(fast, n);
    // The kept tokens: this long a prefix of the sorted keys.
    const int64_t keep = top_p_keep(fast, cand, need, sp);
    if (keep <= cand) {  // the kept set lies in the sorted prefix (block-uniform)
        const int32_t id = draw_kept(fast, keep, sp);
        if (threadIdx.x == 0) out_ids[blockIdx.x] = id;
        return true;
    }
    // keep == need > cand: no top-p cut (a nucleus not reached within the prefix is left to the
    // whole-row sort). The draw lies in the prefix when u falls inside its share of the kept
    // probability, summed over the kept keys in index order.
    if (sp.top_p >= 1.0f) {
        const uint64_t kept_last = need == V ? ~0ull : block_select_key(keys, V, need);
        double mass = 0.0;
        for (int64_t i = threadIdx.x; i < V; i += blockDim.x)
            if (keys[i] <= kept_last) mass += static_cast<double>(key_prob(keys[i]));
        const double total = block_sum(mass);
        double unused = 0.0;
        const int64_t pick = block_prefix_find(fast, cand, total, draw_uniform(sp), true, &unused);
        if (pick < cand) {
            if (threadIdx.x == 0)
                out_ids[blockIdx.x] = static_cast<int32_t>(fast[pick] & 0xffffffffull);
            return true;
        }
    }
    return false;
}

// One block per row: greedy; else the row's keys, the draw from the sorted prefix when it
// decides, else from the whole sorted row.
__global__ void sample_kernel(int32_t* __restrict__ out_ids, const float* __restrict__ logits,
                              int64_t V, SampleParams sp, uint64_t* __restrict__ scratch,
                              int64_t padded) {
    const float* l = logits + blockIdx.x * V;
    if (sp.temperature == 0.0f) {  // greedy: max of (value order, -id)
        unsigned long long best = 0;
        for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
            unsigned long long key = (static_cast<unsigned long long>(float_order(l[c])) << 32) |
                                     (0xffffffffull - static_cast<unsigned long long>(c));
            best = key > best ? key : best;
        }
        best = block_reduce(best, MaxU64{}, 0ull);
        if (threadIdx.x == 0)
            out_ids[blockIdx.x] = static_cast<int32_t>(0xffffffffull - (best & 0xffffffffull));
        return;
    }
    const float inv_t = 1.0f / sp.temperature;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) m = fmaxf(m, l[c] * inv_t);
    m = block_max(m);
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) s += expf(l[c] * inv_t - m);
    const float inv_s = 1.0f / block_sum(s);
    uint64_t* keys = scratch + blockIdx.x * padded;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x)
        keys[i] = prob_key(expf(l[i] * inv_t - m) * inv_s, i);
    __syncthreads();
    const int64_t need = sp.top_k > 0 && sp.top_k < V ? sp.top_k : V;
    if (draw_in_sorted_prefix(out_ids, keys, V, need, sp)) return;  // block-uniform
    // The whole row, padded to a power of 2, sorted in its scratch.
    for (int64_t i = V + threadIdx.x; i < padded; i += blockDim.x) keys[i] = ~0ull;
    __syncthreads();
    block_bitonic_sort(keys, padded);
    const int32_t id = draw_kept(keys, top_p_keep(keys, need, need, sp), sp);
    if (threadIdx.x == 0) out_ids[blockIdx.x] = id;
}

// scratch: sample_scratch_bytes(B, V).
void sample(Stream s, int32_t* out_ids, const float* logits, int64_t B, int64_t V,
            const SampleParams& p, uint64_t* scratch) {
    if (B > 0 && V > 0)
        MT_LAUNCH(sample_kernel, mtk::sample(B), s, out_ids, logits, V, p, scratch,
                  sample_padded(V));
}

}  // namespace mtk
