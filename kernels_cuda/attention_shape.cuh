// The attention kernels' shared shape (scalar attention.cuh, tensor-core attention_wmma.cuh,
// split-K decode attention_decode.cuh): sizes as moetrain::AttnDims, the optional device-side
// length, and row offsets into q/o [B,Tq,H,hd] and k/v [B,S,K,hd]. Inline functions only
// (included by every family).
#pragma once

#include <type_traits>

#include "common.cuh"

namespace mtk {

// tk_dev: the device length added to Tk (may be nullptr); err: where an invalid one is reported.
struct AttnShape {
    int64_t B = 0, Tq = 0, Tk = 0, S = 0, H = 0, K = 0, hd = 0;
    const int32_t* tk_dev = nullptr;
    int32_t* err = nullptr;
};

// Adds the device length to d.Tk (when d.tk_dev is set). False when that leaves [Tq, S]: the
// first thread of the grid reports it and every thread returns (grid-uniform, before any
// barrier), so nothing is written.
__device__ __forceinline__ bool with_device_length(AttnShape& d) {
    if (!d.tk_dev) return true;
    const int64_t extra = *d.tk_dev;
    d.Tk += extra;
    if (d.Tk >= d.Tq && d.Tk <= d.S) return true;
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0)
        report_error(d.err, kErrAttnLength, static_cast<int32_t>(extra));
    return false;
}

__device__ __forceinline__ int64_t qrow(const AttnShape& d, int64_t b, int64_t t, int64_t h) {
    return ((b * d.Tq + t) * d.H + h) * d.hd;
}
__device__ __forceinline__ int64_t kvrow(const AttnShape& d, int64_t b, int64_t u, int64_t g) {
    return ((b * d.S + u) * d.K + g) * d.hd;
}

// The dot product of two rows hd long (the scalar and decode kernels: shared-memory rows).
__device__ __forceinline__ float row_dot(const float* a, const float* b, int hd) {
    float acc = 0.0f;
    for (int c = 0; c < hd; ++c) acc += a[c] * b[c];
    return acc;
}

// The kv head g and the query heads [h_begin, h_end) of a dk/dv block of the tiled and WMMA
// backward (blockIdx.y = g * splits + split; launch.h attn_kv_plan).
struct KvSplit {
    int64_t g, split, h_begin, h_end;
};
__device__ __forceinline__ KvSplit kv_split(const AttnShape& d, int64_t splits, int64_t heads_per) {
    KvSplit s;
    const int64_t group = d.H / d.K;
    s.g = blockIdx.y / splits;
    s.split = blockIdx.y % splits;
    const int64_t first = s.split * heads_per;
    s.h_begin = s.g * group + first;
    s.h_end = s.g * group + (first + heads_per < group ? first + heads_per : group);
    return s;
}
// Where such a block writes dk (which 0) or dv (which 1): dst with one split, else the split's
// partial sums in part ([2][splits][B,S,K,hd]).
__device__ __forceinline__ float* dkdv_out(float* dst, float* part, int which, const KvSplit& s,
                                           int64_t splits, const AttnShape& d) {
    return splits > 1 ? part + (which * splits + s.split) * (d.B * d.S * d.K * d.hd) : dst;
}

// The split dk / dv sums of the tiled and WMMA backward (launch.h attn_kv_plan): dk[i] = sum
// over s < splits, in order, of part[s * n + i]; dv likewise from part[(splits + s) * n + i]
// (n = B * S * K * hd). A template so that every family may include it.
template <typename F = float>
__global__ void attn_dkdv_sum_kernel(F* __restrict__ dk, F* __restrict__ dv,
                                     const F* __restrict__ part, int64_t n, int64_t splits) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        F sk = 0, sv = 0;
        for (int64_t s = 0; s < splits; ++s) {
            sk += part[s * n + i];
            sv += part[(splits + s) * n + i];
        }
        dk[i] = sk;
        dv[i] = sv;
    }
}
// Queues the sums when there is more than one split (else the dk/dv kernel wrote dk, dv).
inline void attention_dkdv_sum(Stream s, float* dk, float* dv, const float* part,
                               const AttnShape& d, int64_t splits) {
    if (splits <= 1) return;
    const int64_t n = d.B * d.S * d.K * d.hd;
    MT_LAUNCH(attn_dkdv_sum_kernel<float>, elementwise(n), s, dk, dv, part, n, splits);
}

// Calls f(std::integral_constant<int, NC>{}) with NC = attn_lane_chunks(hd) (1, 2, 4 or 8): the
// per-lane width the scalar and decode kernels are instantiated for (host code).
template <typename F>
void dispatch_lane_chunks(int64_t hd, F&& f) {
    switch (attn_lane_chunks(hd)) {
        case 1:
            f(std::integral_constant<int, 1>{});
            break;
        case 2:
            f(std::integral_constant<int, 2>{});
            break;
        case 4:
            f(std::integral_constant<int, 4>{});
            break;
        default:
            f(std::integral_constant<int, 8>{});
            break;
    }
}

}  // namespace mtk
