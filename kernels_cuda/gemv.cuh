// Skinny matrix products, the decode step's: C [m, n] = alpha * A [m, k] @ B^T + beta * C, then
// + bias [n] and GELU (pre_act = the value before it) when asked, for m <= kGemvMaxRows rows
// and B stored [n, k] (a linear layer's weight: the `x @ W^T` of every decode product and of
// the LM head). One warp per output column n: its lanes walk B's row n and the m rows of A in
// groups of 8 elements (lane l takes groups l, l + 32, ...), each lane sums its groups in order
// for every row, and the warp's butterfly sum (warp_sum) adds the lanes, so the order is fixed
// by k alone. The products are bandwidth-bound (each weight is read once per step, ~1 FLOP per
// byte at m = 1), which cuBLAS's tiles serve poorly at one row: the H200 profile of gpt2-124m's
// decode had its 74 products per token at ~36 us each, synchronised (docs/BENCHMARKS.md).
//
// Operands are f32, bf16 or f16; under 16-bit compute an f32 operand is rounded to the compute
// type as it is loaded (what the backend's convert would do before cuBLAS), products and sums
// are fp32. A group is one 16-byte load per operand row (two float4 for f32, one uint4 for 8
// 16-bit values) when k % 8 == 0 and every row of A and B starts 16-byte aligned, else eight
// single loads; both paths multiply and add the same values in the same order (built without
// FMA contraction, kernels_cuda/README.md rule 8).
#pragma once

#include "common.cuh"
#include "launch.h"
#include "vector_access.cuh"

namespace mtk {

struct GemvArgs {
    const void* a = nullptr;  // [m, k], row stride lda
    FloatKind a_kind = FloatKind::f32;
    int64_t lda = 0;
    const void* b = nullptr;  // [n, k], row stride ldb
    FloatKind b_kind = FloatKind::f32;
    int64_t ldb = 0;
    float* c = nullptr;  // [m, n], row stride ldc; read only when beta != 0
    int64_t ldc = 0;
    int64_t m = 0, n = 0, k = 0;
    float alpha = 1.0f, beta = 0.0f;
    const float* bias = nullptr;  // [n] or null
    float* pre_act = nullptr;     // GELU: [m, n] (row stride n) gets the value before it; or null
    FloatKind compute = FloatKind::f32;
};

// Element i of an operand as f32, rounded to the compute type when it is stored in f32.
__device__ __forceinline__ float gemv_round(float v, int kind, int compute) {
    if (kind != 0 || compute == 0) return v;
    return compute == 1 ? bf16_bits_to_f32(f32_to_bf16_bits(v))
                        : f16_bits_to_f32(f32_to_f16_bits(v));
}
__device__ __forceinline__ float gemv_element(const void* p, int kind, int64_t i) {
    if (kind == 0) return static_cast<const float*>(p)[i];
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    return kind == 1 ? bf16_bits_to_f32(h) : f16_bits_to_f32(h);
}

// The 8 elements of a group starting at element i (`left` of them inside the row), rounded.
template <bool Vec>
__device__ __forceinline__ void gemv_group(float (&v)[8], const void* p, int kind, int compute,
                                           int64_t i, int64_t left) {
    if constexpr (Vec) {
        if (kind == 0) {
            const float* f = static_cast<const float*>(p) + i;
            const float4 lo = load_vec<float4>(f), hi = load_vec<float4>(f + 4);
            v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
            v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
        } else {
            const uint4 h = load_vec<uint4>(static_cast<const uint16_t*>(p) + i);
            const unsigned w[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const auto lo = static_cast<uint16_t>(w[u] & 0xffffu);
                const auto hi = static_cast<uint16_t>(w[u] >> 16);
                v[2 * u] = kind == 1 ? bf16_bits_to_f32(lo) : f16_bits_to_f32(lo);
                v[2 * u + 1] = kind == 1 ? bf16_bits_to_f32(hi) : f16_bits_to_f32(hi);
            }
        }
    } else {
#pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = u < left ? gemv_element(p, kind, i + u) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = gemv_round(v[u], kind, compute);
}

// The kGemvBatch groups g0, g0 + 32, ... of the row starting at element `row` (those inside its
// k elements; the others stay zero).
template <bool Vec>
__device__ __forceinline__ void gemv_batch(float (&v)[kGemvBatch][8], const void* ptr, int kind,
                                           int compute, int64_t row, int64_t g0, int64_t k) {
#pragma unroll
    for (int j = 0; j < kGemvBatch; ++j) {
        const int64_t i = (g0 + j * kWarp) * kGemvGroup;
        if (i < k) gemv_group<Vec>(v[j], ptr, kind, compute, row + i, k - i);
    }
}

template <int MR, bool Vec>
__global__ void gemv_rows_kernel(GemvArgs p) {
    const int64_t col = int64_t{blockIdx.x} * kGemvWarps + warp_id();
    if (col >= p.n) return;  // the whole warp: no lane reaches the warp sum
    const int ak = static_cast<int>(p.a_kind), bk = static_cast<int>(p.b_kind);
    const int ck = static_cast<int>(p.compute);
    float acc[MR];
#pragma unroll
    for (int r = 0; r < MR; ++r) acc[r] = 0.0f;
    // kGemvBatch of the lane's groups at a time: their loads are issued together, then summed in
    // group order (the order of one group at a time, so the batching does not change the bits).
    const int64_t groups = (p.k + kGemvGroup - 1) / kGemvGroup;
    for (int64_t g0 = lane_id(); g0 < groups; g0 += kWarp * kGemvBatch) {
        float bv[kGemvBatch][8] = {};
        gemv_batch<Vec>(bv, p.b, bk, ck, col * p.ldb, g0, p.k);
#pragma unroll
        for (int r = 0; r < MR; ++r) {
            float av[kGemvBatch][8] = {};
            gemv_batch<Vec>(av, p.a, ak, ck, r * p.lda, g0, p.k);
#pragma unroll
            for (int j = 0; j < kGemvBatch; ++j) {
                if ((g0 + j * kWarp) * kGemvGroup < p.k) {
#pragma unroll
                    for (int u = 0; u < 8; ++u) acc[r] += av[j][u] * bv[j][u];
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < MR; ++r) acc[r] = warp_sum(acc[r]);
    if (lane_id() != 0) return;
#pragma unroll
    for (int r = 0; r < MR; ++r) {
        float v = p.alpha * acc[r];
        float* c = p.c + r * p.ldc + col;
        if (p.beta != 0.0f) v += p.beta * *c;
        if (p.bias) v += p.bias[col];
        if (p.pre_act) {
            p.pre_act[r * p.n + col] = v;
            v = mt_gelu(v);
        }
        *c = v;
    }
}

// Whether every group of (a, lda) / (b, ldb) can be one 16-byte load: k % 8 == 0 and each
// operand's rows start 16-byte aligned.
inline bool gemv_vector_path(const GemvArgs& p) {
    auto aligned = [&](const void* q, FloatKind kind, int64_t ld) {
        const int64_t bytes = kind == FloatKind::f32 ? 4 : 2;
        return reinterpret_cast<uintptr_t>(q) % 16 == 0 && (ld * bytes) % 16 == 0;
    };
    return p.k % kGemvGroup == 0 && aligned(p.a, p.a_kind, p.lda) && aligned(p.b, p.b_kind, p.ldb);
}

template <int MR>
void gemv_rows_m(Stream s, const GemvArgs& p) {
    if (gemv_vector_path(p))
        MT_LAUNCH((gemv_rows_kernel<MR, true>), gemv_geometry(p.n), s, p);
    else
        MT_LAUNCH((gemv_rows_kernel<MR, false>), gemv_geometry(p.n), s, p);
}

// p.m in [1, kGemvMaxRows], p.n, p.k >= 1 (the caller checks, gemv_takes).
inline void gemv_rows(Stream s, const GemvArgs& p) {
    switch (p.m) {
        case 1:
            return gemv_rows_m<1>(s, p);
        case 2:
            return gemv_rows_m<2>(s, p);
        case 3:
            return gemv_rows_m<3>(s, p);
        default:
            return gemv_rows_m<4>(s, p);
    }
}

}  // namespace mtk
