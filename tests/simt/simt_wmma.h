// SIMT harness (test-only): the 16-bit float types and the `nvcuda::wmma` warp matrix operations
// (16x16x16 fragments) the tensor-core kernels use, emulated on the CPU (included by simt.h).
//  - __nv_bfloat16 / half hold the 16 bits; __float2bfloat16_rn / __float2half_rn round to
//    nearest even (moetrain/dtype.h's conversions, the ones every backend uses).
//  - A fragment holds its whole 16x16 matrix in every lane (as float: every bf16 / f16 value is
//    exact in it); kernel code never reads fragment elements, so the GPU's per-lane distribution
//    does not matter, only the collective result.
//  - load_matrix_sync, store_matrix_sync, fill_fragment and mma_sync are warp-collective: each is
//    a warp operation over the full mask, so a lane missing from it (divergent code, a partial
//    warp) is a harness error as for the shuffles. A pointer that is not 32-byte aligned or an ldm
//    that is not a multiple of 16 bytes throws simt::Error (CUDA requires both).
//  - mma_sync computes d = c + sum_k a[i][k] * b[k][j] in fp32, k = 0..15 in order: the product
//    of two bf16 or two f16 values is exact in fp32, so only the additions round, in a fixed
//    order (tensor cores add in their own order; the tests' tolerances cover that).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "moetrain/dtype.h"

struct __nv_bfloat16 {
    uint16_t bits;
};
struct half {
    uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    return {moetrain::f32_to_bf16(f)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
    return std::bit_cast<float>(static_cast<uint32_t>(h.bits) << 16);
}
inline half __float2half_rn(float f) {
    return {moetrain::f32_to_f16(f)};
}
inline float __half2float(half h) {
    return moetrain::f16_to_f32(h.bits);
}

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the harness emulates m16n16k16 only");
    float m[16][16];  // logical (row, column) of the matrix the fragment holds
};

namespace detail {
inline float widen(float v) {
    return v;
}
inline float widen(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
inline float widen(half v) {
    return __half2float(v);
}
inline void warp_collective(const char* op) {
    (void)op;
    simt::warp_exchange(simt::WarpOp::sync, 0xffffffffu, 0, 0, warpSize);
    SIMT_FENCE();
}
template <typename T>
void check_access(const T* p, unsigned ldm, const char* op) {
    if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
        throw simt::Error(std::string("wmma ") + op + ": pointer not 32-byte aligned");
    if ((ldm * sizeof(T)) % 16 != 0)
        throw simt::Error(std::string("wmma ") + op + ": ldm " + std::to_string(ldm) +
                          " is not a multiple of 16 bytes");
}
// Element (r, c) of a 16x16 matrix stored at p with leading dimension ldm.
template <typename T>
const T& at(const T* p, unsigned ldm, bool row_major, int r, int c) {
    return row_major ? p[static_cast<size_t>(r) * ldm + c] : p[static_cast<size_t>(c) * ldm + r];
}
}  // namespace detail

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float v) {
    detail::warp_collective("fill_fragment");
    for (auto& row : f.m)
        for (float& x : row) x = v;
}

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
    static_assert(!std::is_void_v<Layout>, "an accumulator load names its memory layout");
    detail::check_access(p, ldm, "load_matrix_sync");
    detail::warp_collective("load_matrix_sync");
    const bool rm = std::is_same_v<Layout, row_major>;
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.m[r][c] = detail::widen(detail::at(p, ldm, rm, r, c));
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t layout) {
    detail::check_access(p, ldm, "load_matrix_sync");
    detail::warp_collective("load_matrix_sync");
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.m[r][c] = detail::at(p, ldm, layout == mem_row_major, r, c);
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
    detail::check_access(p, ldm, "store_matrix_sync");
    detail::warp_collective("store_matrix_sync");
    // Each lane writes its share (as on a GPU): a reader that skips __syncwarp sees stale data.
    const int lane = static_cast<int>(threadIdx.x % warpSize);
    for (int e = lane; e < 256; e += warpSize) {
        const int r = e / 16, c = e % 16;
        const bool rm = layout == mem_row_major;
        p[rm ? static_cast<size_t>(r) * ldm + c : static_cast<size_t>(c) * ldm + r] = f.m[r][c];
    }
}

template <typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
    static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, half>,
                  "the harness emulates bf16 and f16 operands");
    detail::warp_collective("mma_sync");
    fragment<accumulator, 16, 16, 16, float> out;
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
            float acc = c.m[i][j];
            for (int k = 0; k < 16; ++k) acc += a.m[i][k] * b.m[k][j];
            out.m[i][j] = acc;
        }
    d = out;
}

}  // namespace nvcuda::wmma
