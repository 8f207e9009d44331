// Every cuBLAS call of the backend, in one place. Row-major products are mapped onto cuBLAS's
// column-major API with the usual transpose trick: a row-major C[m,n] is the column-major C^T,
// and C^T = op(B)^T op(A)^T, so cuBLAS computes (n x m) = op'(B) (n x k) * op'(A) (k x m) with
// B passed first and the transposes carried over unchanged.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "moetrain/device.h"

namespace moetrain::cuda {

// The cuBLAS arguments for one row-major GemmArgs (plain data; unit-testable).
struct ColumnMajorGemm {
    cublasOperation_t transa, transb;  // applied to the first (B) and second (A) operand
    int m, n, k;                       // cuBLAS m = our n, cuBLAS n = our m
    int lda, ldb, ldc;                 // leading dimensions of B, A, C as cuBLAS sees them
    long long stride_a, stride_b, stride_c;
    int batch;
};
// Throws moetrain::Error when a size does not fit cuBLAS's 32-bit arguments.
ColumnMajorGemm to_column_major(const GemmArgs& g);

// C = alpha op(A) op(B) + beta C (strided-batched) with A and B stored as g.compute and an f32
// C, CUBLAS_COMPUTE_32F: f32 operands give strict fp32 products (no TF32), bf16 / f16 ones
// (CUDA_R_16BF / CUDA_R_16F) fp32 accumulation on tensor cores where the GPU has them.
void gemm_strided(cublasHandle_t handle, const GemmArgs& g, const void* a, const void* b, float* c);

// C_e = alpha op(A_e) op(B_e) + beta C_e for e < batch, with the matrices at the device
// pointers a_ptrs[e], b_ptrs[e], c_ptrs[e] (device arrays; cublasGemmBatchedEx). g gives the
// row-major sizes, transposes, ld, alpha, beta and compute (g.batch, strides and tensors are
// not used); A and B are stored as g.compute, C as f32; CUBLAS_COMPUTE_32F.
void gemm_batched(cublasHandle_t handle, const GemmArgs& g, const void* const* a_ptrs,
                  const void* const* b_ptrs, float* const* c_ptrs, int64_t batch);

}  // namespace moetrain::cuda
