// The dtype rules of GemmArgs (api/moetrain/device.h) shared by every backend's gemm (host
// code): compute is f32, bf16 or f16; A and B are each f32 or the 16-bit compute type; C is
// f32. One check, one error message, on every backend.
#pragma once

#include <cstdint>

#include "moetrain/device.h"
#include "moetrain/error.h"

namespace moetrain {

inline bool gemm_is_16bit(DType t) {
    return t == DType::bf16 || t == DType::f16;
}

// Throws moetrain::Error naming the dtypes when g breaks the rules above.
inline void check_gemm_dtypes(const GemmArgs& g) {
    MT_CHECK(g.compute == DType::f32 || gemm_is_16bit(g.compute), "gemm: compute dtype ",
             dtype_name(g.compute), " is not f32, bf16 or f16");
    MT_CHECK(g.c.dtype == DType::f32, "gemm: C is ", dtype_name(g.c.dtype), ", must be f32");
    auto operand = [&](const Tensor& t, const char* name) {
        MT_CHECK(t.dtype == DType::f32 || t.dtype == g.compute, "gemm: ", name, " is ",
                 dtype_name(t.dtype), " with compute ", dtype_name(g.compute),
                 " (operands are f32 or the compute dtype)");
    };
    operand(g.a, "A");
    operand(g.b, "B");
}

// Elements spanned by `batch` stored matrices of rows x cols with row stride ld and batch
// stride `stride` (0 for an empty matrix).
inline int64_t gemm_span(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
    return rows == 0 || cols == 0 ? 0 : (batch - 1) * stride + (rows - 1) * ld + cols;
}

}  // namespace moetrain
