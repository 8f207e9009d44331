// The column-major GEMM of the cudasim stand-ins for cuBLAS (fake_cuda_runtime.cpp) and cuBLASLt
// (fake_cublaslt.cpp): plain loops with double accumulation over f32, bf16 or f16 A / B (both the
// same type) and an f32 C.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "moetrain/dtype.h"

namespace fake {

// Element i of a cuBLAS operand of type t as a double.
inline double load(const void* p, cudaDataType t, long long i) {
    if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    return t == CUDA_R_16BF ? moetrain::bf16_to_f32(h) : moetrain::f16_to_f32(h);
}
inline size_t elem_bytes(cudaDataType t) {
    return t == CUDA_R_32F ? 4 : 2;
}

inline bool supported(cudaDataType a, cudaDataType b, cudaDataType c, cublasComputeType_t compute) {
    const bool known = a == CUDA_R_32F || a == CUDA_R_16BF || a == CUDA_R_16F;
    return known && b == a && c == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F;
}

// One column-major product C = al op(A) op(B) + be C (A and B of type t, C f32), double
// accumulation; be = 0 does not read C.
inline void gemm_one(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                     float al, const void* a, cudaDataType t, int lda, const void* b, int ldb,
                     float be, float* c, int ldc) {
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            double acc = 0;
            for (int p = 0; p < k; ++p) {
                double av = load(a, t,
                                 transa == CUBLAS_OP_N ? i + static_cast<long long>(p) * lda
                                                       : p + static_cast<long long>(i) * lda);
                double bv = load(b, t,
                                 transb == CUBLAS_OP_N ? p + static_cast<long long>(j) * ldb
                                                       : j + static_cast<long long>(p) * ldb);
                acc += av * bv;
            }
            float& cv = c[i + static_cast<long long>(j) * ldc];
            cv = be == 0.0f ? static_cast<float>(al * acc) : static_cast<float>(al * acc + be * cv);
        }
}

}  // namespace fake
