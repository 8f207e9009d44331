// Token sampling (MODEL.md 7), one block per row. Greedy: a block argmax, ties to the lower id.
// Otherwise: p = softmax(logits / temperature); the row's (p, id) pairs are packed into 64-bit
// keys that sort ascending as (p descending, id ascending), bitonic-sorted in the row's scratch;
// top-k cuts the prefix, top-p keeps the shortest prefix whose cumulative p reaches top_p; the
// Philox uniform u of (seed, step + uint32(step_dev[0]), row) then picks the first kept id whose
// cumulative renormalised probability exceeds u. Prefix sums are block scans in double.
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
    for (int64_t i = threadIdx.x; i < padded; i += blockDim.x)
        keys[i] = i < V ? prob_key(expf(l[i] * inv_t - m) * inv_s, i) : ~0ull;
    __syncthreads();
    for (int64_t k = 2; k <= padded; k <<= 1) {  // bitonic sort, ascending
        for (int64_t j = k >> 1; j > 0; j >>= 1) {
            for (int64_t i = threadIdx.x; i < padded; i += blockDim.x) {
                int64_t ixj = i ^ j;
                if (ixj <= i) continue;
                uint64_t a = keys[i], b = keys[ixj];
                if ((a > b) == ((i & k) == 0)) {
                    keys[i] = b;
                    keys[ixj] = a;
                }
            }
            __syncthreads();
        }
    }
    int64_t keep = sp.top_k > 0 && sp.top_k < V ? sp.top_k : V;
    double total = 0.0;
    if (sp.top_p < 1.0f) {
        int64_t cut =
            block_prefix_find(keys, keep, 1.0, static_cast<double>(sp.top_p), false, &total);
        if (cut < keep) keep = cut + 1;
    }
    block_prefix_find(keys, keep, 1.0, 2.0, false, &total);  // total of the kept probabilities
    const uint64_t step = sp.step + (sp.step_dev ? static_cast<uint32_t>(*sp.step_dev) : 0u);
    const double u = mt_philox_uniform(sp.seed, step, blockIdx.x);
    int64_t pick = block_prefix_find(keys, keep, total, u, true, &total);
    if (pick >= keep) pick = keep - 1;
    if (threadIdx.x == 0) out_ids[blockIdx.x] = static_cast<int32_t>(keys[pick] & 0xffffffffull);
}

// scratch: sample_scratch_bytes(B, V).
void sample(Stream s, int32_t* out_ids, const float* logits, int64_t B, int64_t V,
            const SampleParams& p, uint64_t* scratch) {
    if (B > 0 && V > 0)
        MT_LAUNCH(sample_kernel, mtk::sample(B), s, out_ids, logits, V, p, scratch,
                  sample_padded(V));
}

}  // namespace mtk
