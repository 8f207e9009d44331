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

int64_t packed_count(const StoredMatrix& m) {
    return m.stride == 0 ? 1 : m.batch;
}

StoredMatrix packed_view(const StoredMatrix& m, const void* dst, DType dtype, int64_t rows,
                         int64_t cols) {
    StoredMatrix p = m;
    p.data = dst;
    p.dtype = dtype;
    p.rows = rows;
    p.cols = cols;
    p.ld = std::max<int64_t>(cols, 1);
    p.stride = m.stride == 0 ? 0 : rows * cols;
    return p;
}

// Fills the packed [count, rows_to, cols_to] block dst: row(dst_row, src_row) converts the
// m.cols values of each stored row, the padding (rows >= m.rows, columns >= m.cols) is zero.
// Parallel over the rows of all matrices.
template <typename Src, typename Dst, typename F>
void for_rows(const StoredMatrix& m, Dst* dst, int64_t rows_to, int64_t cols_to, F&& row) {
    const auto* src = static_cast<const Src*>(m.data);
    const int64_t rows = packed_count(m) * rows_to;
#pragma omp parallel for schedule(static) if (rows * cols_to > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = r / rows_to, rr = r % rows_to;
        Dst* d = dst + r * cols_to;
        if (rr >= m.rows) {
            std::fill(d, d + cols_to, Dst{0});
            continue;
        }
        row(d, src + i * m.stride + rr * m.ld);
        std::fill(d + m.cols, d + cols_to, Dst{0});
    }
}

}  // namespace

int64_t packed_elements(const StoredMatrix& m, int64_t rows_to, int64_t cols_to) {
    return packed_count(m) * rows_to * cols_to;
}

StoredMatrix pack_bf16(const StoredMatrix& m, uint16_t* dst, int64_t rows_to, int64_t cols_to) {
    const int64_t n = m.cols;
    if (m.dtype == DType::bf16)
        for_rows<uint16_t>(m, dst, rows_to, cols_to,
                           [n](uint16_t* d, const uint16_t* s) { std::copy(s, s + n, d); });
    else
        for_rows<float>(m, dst, rows_to, cols_to, [n](uint16_t* d, const float* s) {
            for (int64_t j = 0; j < n; ++j) d[j] = bf16_bits(s[j]);
        });
    return packed_view(m, dst, DType::bf16, rows_to, cols_to);
}

StoredMatrix pack_rounded_f32(const StoredMatrix& m, DType compute, float* dst) {
    const int64_t n = m.cols;
    auto pack = [&](auto tag, auto&& convert) {
        using Src = decltype(tag);
        for_rows<Src>(m, dst, m.rows, m.cols, [&](float* d, const Src* s) {
            for (int64_t j = 0; j < n; ++j) d[j] = convert(s[j]);
        });
    };
    if (m.dtype == DType::bf16)
        pack(uint16_t{}, [](uint16_t h) { return bf16_value(h); });
    else if (m.dtype == DType::f16)
        pack(uint16_t{}, [](uint16_t h) { return f16_value(h); });
    else if (compute == DType::bf16)
        pack(float{}, [](float f) { return round_bf16(f); });
    else
        pack(float{}, [](float f) { return round_f16(f); });
    return packed_view(m, dst, DType::f32, m.rows, m.cols);
}

}  // namespace moetrain::cpu
