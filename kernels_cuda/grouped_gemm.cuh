// The device side of Device::gemm_grouped (docs/CUDA.md, "Grouped GEMM"): the products are
// cuBLAS batched calls queued by backends/cuda, sized on the host from the capacity alone; these
// kernels turn the group sizes, which stay on the device, into what those calls read.
//  - grouped_pointers (dim m): one block; thread 0 scans the sizes into group spans (reporting
//    a negative size or a total over the capacity into the error word, with the groups clamped),
//    then the block writes the A / B / C pointer arrays of every class's batched call
//    (backends/shared/grouped_gemm_plan.h: entry_tile). Dummy entries read A's first rows and
//    B_0 and write a scratch C.
//  - grouped_tiles (dim k): the same scan, then the table of padded tiles (group, first row,
//    rows; group -1 for the dummies at the end).
//  - grouped_scale (dim k): C_i = beta C_i (beta 0 writes zeros: C is not read).
//  - grouped_pad (dim k): the tiles of one round copied compact, converted to the compute
//    dtype, with the rows past a tile's end (and dummy tiles) zero, so every product of the
//    round has exactly TM rows.
//  - grouped_reduce (dim k): adds the round's partial products into C_{group}, partial by
//    partial in tile order (consecutive partials of one group summed first): deterministic,
//    no atomics.
//  - grouped_problems (both dims, for a grouped kernel that reads per-group sizes and pointers
//    from device memory: CUTLASS's, backends/cuda/cutlass_grouped.h): the same scan, then per
//    group its product's sizes (M, N, K) and its A / B / C pointers.
#pragma once

#include "common.cuh"
#include "grouped_gemm_plan.h"

namespace mtk {

// Dim m pointer-array inputs: A's first row and its row stride, B_0 and the distance between
// consecutive B_i, both in bytes of the operands the products read; C (f32) with its row stride
// in elements; the C that dummy entries write.
struct GroupedOperands {
    const void* a = nullptr;
    int64_t a_row_bytes = 0;
    const void* b = nullptr;
    int64_t b_group_bytes = 0;
    float* c = nullptr;
    int64_t ldc = 0;
    float* dummy_c = nullptr;
};

namespace gp = moetrain::grouped;

// Thread 0 scans the sizes into spans; every thread gets the tile total of the scan.
__device__ __forceinline__ int64_t grouped_scan(const int32_t* sizes, int64_t groups,
                                                int64_t capacity, int64_t tile, bool round_up,
                                                gp::Span* spans, int32_t* err) {
    __shared__ int64_t total;
    if (threadIdx.x == 0) {
        const gp::ScanResult r = gp::scan_groups(sizes, groups, capacity, tile, round_up, spans);
        if (r.error != gp::kScanOk)
            report_error(err, r.error == gp::kScanNegative ? kErrGroupRows : kErrGroupTotal,
                         r.value);
        total = r.tiles;
    }
    __syncthreads();  // the spans (global memory) and the total are visible to the block
    return total;
}

__global__ void grouped_pointers_kernel(const int32_t* __restrict__ sizes, int64_t groups,
                                        int64_t capacity, int64_t tile, int64_t big,
                                        int64_t entries, GroupedOperands o, gp::Span* spans,
                                        const void** a_ptrs, const void** b_ptrs, float** c_ptrs,
                                        int32_t* err) {
    const int64_t big_total = grouped_scan(sizes, groups, capacity, tile, false, spans, err);
    const auto* a = static_cast<const char*>(o.a);
    const auto* b = static_cast<const char*>(o.b);
    for (int64_t e = threadIdx.x; e < entries; e += blockDim.x) {
        const gp::Tile t = gp::entry_tile(spans, groups, tile, big, big_total, e);
        const bool real = t.group >= 0;
        a_ptrs[e] = a + (real ? t.row0 * o.a_row_bytes : 0);
        b_ptrs[e] = b + (real ? t.group * o.b_group_bytes : 0);
        c_ptrs[e] = real ? o.c + t.row0 * o.ldc : o.dummy_c;
    }
}

__global__ void grouped_tiles_kernel(const int32_t* __restrict__ sizes, int64_t groups,
                                     int64_t capacity, int64_t tile, int64_t tiles, gp::Span* spans,
                                     gp::Tile* table, int32_t* err) {
    const int64_t total = grouped_scan(sizes, groups, capacity, tile, true, spans, err);
    for (int64_t t = threadIdx.x; t < tiles; t += blockDim.x)
        table[t] = gp::tile_of(spans, groups, tile, total, t);
}

__global__ void grouped_scale_kernel(float* c, int64_t groups, int64_t stride_c, int64_t m,
                                     int64_t n, int64_t ldc, float beta) {
    for (int64_t i = global_thread(); i < groups * m * n; i += grid_threads()) {
        const int64_t g = i / (m * n), r = i / n % m, col = i % n;
        float& v = c[g * stride_c + r * ldc + col];
        v = beta == 0.0f ? 0.0f : beta * v;
    }
}

__device__ __forceinline__ float grouped_load(const void* p, int kind, int64_t i) {
    if (kind == 0) return static_cast<const float*>(p)[i];
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    return kind == 1 ? bf16_bits_to_f32(h) : f16_bits_to_f32(h);
}

// dst: count * tile rows of `cols` (compact, dst_kind); src: rows of `cols` with stride ld.
__global__ void grouped_pad_kernel(void* dst, int dst_kind, const void* src, int src_kind,
                                   int64_t ld, int64_t cols, const gp::Tile* __restrict__ table,
                                   int64_t count, int64_t tile) {
    for (int64_t i = global_thread(); i < count * tile * cols; i += grid_threads()) {
        const int64_t pr = i / cols, col = i % cols;
        const gp::Tile t = table[pr / tile];
        const int64_t rr = pr % tile;
        const float v = t.group >= 0 && rr < t.rows
                            ? grouped_load(src, src_kind, (t.row0 + rr) * ld + col)
                            : 0.0f;
        if (dst_kind == 0)
            static_cast<float*>(dst)[i] = v;
        else
            static_cast<uint16_t*>(dst)[i] =
                dst_kind == 1 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
    }
}

// partials: count compact m x n products of the tiles table[0 .. count).
__global__ void grouped_reduce_kernel(float* c, int64_t stride_c, int64_t ldc,
                                      const float* __restrict__ partials,
                                      const gp::Tile* __restrict__ table, int64_t count, int64_t m,
                                      int64_t n) {
    for (int64_t i = global_thread(); i < m * n; i += grid_threads()) {
        const int64_t at = i / n * ldc + i % n;
        int32_t cur = -1;
        float acc = 0.0f;
        for (int64_t p = 0; p < count; ++p) {
            const int32_t g = table[p].group;
            if (g < 0) continue;
            const float v = partials[p * m * n + i];
            if (g == cur) {
                acc += v;
                continue;
            }
            if (cur >= 0) c[cur * stride_c + at] += acc;
            cur = g;
            acc = v;
        }
        if (cur >= 0) c[cur * stride_c + at] += acc;
    }
}

// Per-group products for a kernel with device-side sizes: group i's rows [row0, row0 + rows)
// give A_i = a + row0 * a_row_bytes, B_i = b + row0 * b_row_bytes + i * b_group_bytes and
// C_i = c + row0 * c_row + i * c_group (elements). Dim m multiplies A_i [rows, k] by B_i into
// C_i's rows (b_row_bytes 0, c_group 0); dim k multiplies A_i^T [m, rows] by B_i [rows, n] into
// C_i (c_row 0, b_group_bytes 0).
struct GroupedSteps {
    const void* a = nullptr;
    int64_t a_row_bytes = 0;
    const void* b = nullptr;
    int64_t b_row_bytes = 0, b_group_bytes = 0;
    float* c = nullptr;
    int64_t c_row = 0, c_group = 0;
};

// problems[3 i .. 3 i + 2] = (M, N, K) of group i: dim m (rows, n, k), dim k (m, n, rows), and
// (0, n, 0) for an empty dim-k group (no output tile: its C_i keeps what grouped_scale left).
__global__ void grouped_problems_kernel(const int32_t* __restrict__ sizes, int64_t groups,
                                        int64_t capacity, bool dim_k, int32_t m, int32_t n,
                                        int32_t k, GroupedSteps o, gp::Span* spans,
                                        int32_t* problems, const void** a_ptrs, const void** b_ptrs,
                                        float** c_ptrs, int32_t* err) {
    grouped_scan(sizes, groups, capacity, 1, false, spans, err);
    const auto* a = static_cast<const char*>(o.a);
    const auto* b = static_cast<const char*>(o.b);
    for (int64_t i = threadIdx.x; i < groups; i += blockDim.x) {
        const gp::Span s = spans[i];
        problems[3 * i] = dim_k ? (s.rows > 0 ? m : 0) : s.rows;
        problems[3 * i + 1] = n;
        problems[3 * i + 2] = dim_k ? s.rows : k;
        a_ptrs[i] = a + s.row0 * o.a_row_bytes;
        b_ptrs[i] = b + s.row0 * o.b_row_bytes + i * o.b_group_bytes;
        c_ptrs[i] = o.c + s.row0 * o.c_row + i * o.c_group;
    }
}

// One block: spans[groups] from sizes, then the `entries` pointers of every class (entry_tile).
void grouped_pointers(Stream s, const int32_t* sizes, int64_t groups, int64_t capacity,
                      int64_t tile, int64_t big, int64_t entries, const GroupedOperands& o,
                      gp::Span* spans, const void** a_ptrs, const void** b_ptrs, float** c_ptrs,
                      int32_t* err) {
    if (groups > 0 && entries > 0)
        MT_LAUNCH(grouped_pointers_kernel, grouped_plan(), s, sizes, groups, capacity, tile, big,
                  entries, o, spans, a_ptrs, b_ptrs, c_ptrs, err);
}

// One block: spans[groups], then each group's (M, N, K) and A / B / C pointers (GroupedSteps).
void grouped_problems(Stream s, const int32_t* sizes, int64_t groups, int64_t capacity, bool dim_k,
                      int32_t m, int32_t n, int32_t k, const GroupedSteps& o, gp::Span* spans,
                      int32_t* problems, const void** a_ptrs, const void** b_ptrs, float** c_ptrs,
                      int32_t* err) {
    if (groups > 0)
        MT_LAUNCH(grouped_problems_kernel, grouped_plan(), s, sizes, groups, capacity, dim_k, m, n,
                  k, o, spans, problems, a_ptrs, b_ptrs, c_ptrs, err);
}

// One block: spans[groups], then table[tiles] of the padded tiles (tile_of, rounding up).
void grouped_tiles(Stream s, const int32_t* sizes, int64_t groups, int64_t capacity, int64_t tile,
                   int64_t tiles, gp::Span* spans, gp::Tile* table, int32_t* err) {
    if (groups > 0 && tiles > 0)
        MT_LAUNCH(grouped_tiles_kernel, grouped_plan(), s, sizes, groups, capacity, tile, tiles,
                  spans, table, err);
}

// C_i = beta * C_i for i < groups (C_i = c + i * stride_c, m x n, row stride ldc).
void grouped_scale(Stream s, float* c, int64_t groups, int64_t stride_c, int64_t m, int64_t n,
                   int64_t ldc, float beta) {
    if (groups * m * n > 0)
        MT_LAUNCH(grouped_scale_kernel, elementwise(groups * m * n), s, c, groups, stride_c, m, n,
                  ldc, beta);
}

// The `count` tiles table[0 .. count) of TM = tile rows each, copied from src (rows of `cols`,
// row stride ld) into dst compact (count * tile rows of cols), converted to dst_kind; rows past
// a tile's end and dummy tiles are zero.
void grouped_pad(Stream s, void* dst, FloatKind dst_kind, const void* src, FloatKind src_kind,
                 int64_t ld, int64_t cols, const gp::Tile* table, int64_t count, int64_t tile) {
    if (count * tile * cols > 0)
        MT_LAUNCH(grouped_pad_kernel, elementwise(count * tile * cols), s, dst,
                  static_cast<int>(dst_kind), src, static_cast<int>(src_kind), ld, cols, table,
                  count, tile);
}

// C_{table[p].group} += partial p (compact m x n, p < count, in order); dummies skipped.
void grouped_reduce(Stream s, float* c, int64_t stride_c, int64_t ldc, const float* partials,
                    const gp::Tile* table, int64_t count, int64_t m, int64_t n) {
    if (count > 0 && m * n > 0)
        MT_LAUNCH(grouped_reduce_kernel, elementwise(m * n), s, c, stride_c, ldc, partials, table,
                  count, m, n);
}

}  // namespace mtk
