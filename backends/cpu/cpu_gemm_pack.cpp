// Operand packing of the 16-bit GEMMs (cpu_gemm.h): a stored operand (any ld, batch stride,
// f32 / bf16 / f16) is copied into a compact block in the form the product needs, bf16 bit
// patterns for oneDNN's bf16 matmul or f32 values rounded through the compute type for the f32
// GEMM. Rows are split over the OpenMP threads; the per-element conversions are the
// branch-free ones of cpu_round16.h, so the inner loops vectorise.
#include <algorithm>

#include "cpu/cpu_gemm.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_round16.h"

namespace moetrain::cpu {
namespace {

int64_t packed_count(const StoredMatrix& m) { return m.stride == 0 ? 1 : m.batch; }

StoredMatrix packed_view(const StoredMatrix& m, const void* dst, DType dtype) {
    StoredMatrix p = m;
    p.data = dst;
    p.dtype = dtype;
    p.ld = std::max<int64_t>(m.cols, 1);
    p.stride = m.stride == 0 ? 0 : m.rows * m.cols;
    return p;
}

// row(dst_row, src_row) for every stored row of m, in parallel over the rows of all matrices.
template <typename Src, typename Dst, typename F>
void for_rows(const StoredMatrix& m, Dst* dst, F&& row) {
    const auto* src = static_cast<const Src*>(m.data);
    const int64_t rows = packed_count(m) * m.rows;
#pragma omp parallel for schedule(static) if (rows * m.cols > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = r / m.rows, rr = r % m.rows;
        row(dst + r * m.cols, src + i * m.stride + rr * m.ld);
    }
}

}  // namespace

int64_t packed_elements(const StoredMatrix& m) { return packed_count(m) * m.rows * m.cols; }

StoredMatrix pack_bf16(const StoredMatrix& m, uint16_t* dst) {
    const int64_t n = m.cols;
    if (m.dtype == DType::bf16)
        for_rows<uint16_t>(m, dst, [n](uint16_t* d, const uint16_t* s) { std::copy(s, s + n, d); });
    else
        for_rows<float>(m, dst, [n](uint16_t* d, const float* s) {
            for (int64_t j = 0; j < n; ++j) d[j] = bf16_bits(s[j]);
        });
    return packed_view(m, dst, DType::bf16);
}

StoredMatrix pack_rounded_f32(const StoredMatrix& m, DType compute, float* dst) {
    const int64_t n = m.cols;
    if (m.dtype == DType::bf16) {
        for_rows<uint16_t>(m, dst, [n](float* d, const uint16_t* s) {
            for (int64_t j = 0; j < n; ++j) d[j] = bf16_value(s[j]);
        });
    } else if (m.dtype == DType::f16) {
        for_rows<uint16_t>(m, dst, [n](float* d, const uint16_t* s) {
            for (int64_t j = 0; j < n; ++j) d[j] = f16_value(s[j]);
        });
    } else if (compute == DType::bf16) {
        for_rows<float>(m, dst, [n](float* d, const float* s) {
            for (int64_t j = 0; j < n; ++j) d[j] = round_bf16(s[j]);
        });
    } else {
        for_rows<float>(m, dst, [n](float* d, const float* s) {
            for (int64_t j = 0; j < n; ++j) d[j] = round_f16(s[j]);
        });
    }
    return packed_view(m, dst, DType::f32);
}

}  // namespace moetrain::cpu
