// CPU element-wise algebra: add, axpby, bias add and the bias gradient (column sums over rows
// accumulated in double, one column block per thread: deterministic).
#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"

namespace moetrain {

void CpuDevice::add_impl(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) {
    const auto [o, x, y] = f32s(out, a, b);
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

void CpuDevice::axpby_impl(const Tensor& y, float alpha, const Tensor& x, float beta, int64_t n) {
    float* py = f32(y);
    const float* px = f32(x);
    if (beta == 0.0f) {  // y is not read (it may hold garbage)
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelMin)
        for (int64_t i = 0; i < n; ++i) py[i] = alpha * px[i];
        return;
    }
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) py[i] = alpha * px[i] + beta * py[i];
}

void CpuDevice::add_bias_impl(const Tensor& y, const Tensor& bias, int64_t rows, int64_t cols) {
    float* py = f32(y);
    const float* pb = f32(bias);
#pragma omp parallel for schedule(static) if (rows * cols > cpu::kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
        float* row = py + r * cols;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) row[c] += pb[c];
    }
}

// A dy stored in 16 bits is summed widened in place, in the f32 path's order.
void CpuDevice::bias_grad_impl(const Tensor& dbias, const Tensor& dy, int64_t rows, int64_t cols) {
    float* db = f32(dbias);
    if (dy.dtype == DType::f32) {
        const float* pdy = f32(dy);
        cpu::add_column_sums(db, rows, cols, [&](int64_t i) { return pdy[i]; });
        return;
    }
    const auto* h = static_cast<const uint16_t*>(raw(dy));
    if (dy.dtype == DType::bf16)
        cpu::add_column_sums(db, rows, cols, [&](int64_t i) { return bf16_to_f32(h[i]); });
    else
        cpu::add_column_sums(db, rows, cols, [&](int64_t i) { return f16_to_f32(h[i]); });
}

}  // namespace moetrain
