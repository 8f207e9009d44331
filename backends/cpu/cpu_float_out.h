// Op outputs stored in their tensor's dtype (device_ops.def's FLOAT outputs: the norms' y,
// act_fwd's y, act_bwd's dx, swiglu_fwd's h, cross_entropy's dlogits): the f32 values an op
// computes are written as they are into an f32 tensor, or rounded to nearest even into a bf16 / f16
// one (dtype.h's conversions), which gives the same bits as an f32 output followed by `convert`.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/cpu_parallel.h"
#include "cpu/cpu_round16.h"
#include "moetrain/dtype.h"

namespace moetrain::cpu {

// dst[i] = src[i] rounded to the 16-bit dtype t (bf16 or f16), i < n.
inline void round_into(uint16_t* dst, DType t, const float* src, int64_t n) {
    if (t == DType::bf16) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits(src[i]);
    } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
    }
}

// y[i] = value(i) for i < n, y of dtype t (f32, bf16 or f16), the elements spread over the
// threads. A 16-bit y is written in blocks, each computed into a stack buffer and rounded.
template <typename F>
void map_out(void* y, DType t, int64_t n, F value) {
    if (t == DType::f32) {
        auto* out = static_cast<float*>(y);
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
        for (int64_t i = 0; i < n; ++i) out[i] = value(i);
        return;
    }
    constexpr int64_t kBlock = 1024;
    auto* out = static_cast<uint16_t*>(y);
    const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (int64_t b = 0; b < blocks; ++b) {
        float buf[kBlock];
        const int64_t i0 = b * kBlock, len = n - i0 < kBlock ? n - i0 : kBlock;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) buf[j] = value(i0 + j);
        round_into(out + i0, t, buf, len);
    }
}

// The rows of an output y [rows, dim] of dtype t, written one row at a time by the thread that
// computes it: at(r) is where row r's f32 values go (the row itself when y is f32, else this
// thread's row buffer) and done(r) rounds a buffered row into y.
class RowsOut {
  public:
    RowsOut(void* y, DType t, int64_t dim) : y_(y), t_(t), dim_(dim) {}
    float* at(int64_t r) const {
        if (t_ == DType::f32) return static_cast<float*>(y_) + r * dim_;
        thread_local std::vector<float> row;
        if (static_cast<int64_t>(row.size()) < dim_) row.resize(static_cast<size_t>(dim_));
        return row.data();
    }
    void done(int64_t r, const float* values) const {
        if (t_ != DType::f32) round_into(static_cast<uint16_t*>(y_) + r * dim_, t_, values, dim_);
    }

  private:
    void* y_;
    DType t_;
    int64_t dim_;
};

}  // namespace moetrain::cpu
