// The row-major -> column-major mapping and the cuBLAS GEMM call (see cublas_calls.h).
#include "cuda/cublas_calls.h"

#include <climits>
#include <string>

#include "cuda/cuda_errors.h"

namespace moetrain::cuda {
namespace {
int fit_int(int64_t v, const char* what) {
    MT_CHECK(v >= 0 && v <= INT_MAX, "gemm: ", what, " ", v, " does not fit cuBLAS (32-bit)");
    return static_cast<int>(v);
}
cublasOperation_t op(Trans t) {
    return t == Trans::N ? CUBLAS_OP_N : CUBLAS_OP_T;
}
}  // namespace

ColumnMajorGemm to_column_major(const GemmArgs& g) {
    ColumnMajorGemm c{};
    c.transa = op(g.tb);
    c.transb = op(g.ta);
    c.m = fit_int(g.n, "n");
    c.n = fit_int(g.m, "m");
    c.k = fit_int(g.k, "k");
    c.lda = fit_int(g.ldb, "ldb");
    c.ldb = fit_int(g.lda, "lda");
    c.ldc = fit_int(g.ldc, "ldc");
    c.stride_a = g.stride_b;
    c.stride_b = g.stride_a;
    c.stride_c = g.stride_c;
    c.batch = fit_int(g.batch, "batch");
    return c;
}

namespace {
cudaDataType operand_type(DType compute) {
    MT_CHECK(compute == DType::f32 || compute == DType::bf16 || compute == DType::f16,
             "gemm: compute ", dtype_name(compute), " is not f32, bf16 or f16");
    return compute == DType::f32 ? CUDA_R_32F : compute == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
}

}  // namespace

void gemm_strided(cublasHandle_t handle, const GemmArgs& g, const void* a, const void* b,
                  float* c) {
    const cudaDataType ab = operand_type(g.compute);
    const std::string what =
        std::string("cublasGemmStridedBatchedEx (") + dtype_name(g.compute) + " gemm)";
    ColumnMajorGemm cm = to_column_major(g);
    check_cublas(cublasGemmStridedBatchedEx(
                     handle, cm.transa, cm.transb, cm.m, cm.n, cm.k, &g.alpha, b, ab, cm.lda,
                     cm.stride_a, a, ab, cm.ldb, cm.stride_b, &g.beta, c, CUDA_R_32F, cm.ldc,
                     cm.stride_c, cm.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 what.c_str());
}

void gemm_batched(cublasHandle_t handle, const GemmArgs& g, const void* const* a_ptrs,
                  const void* const* b_ptrs, float* const* c_ptrs, int64_t batch) {
    GemmArgs one = g;
    one.batch = batch;
    one.stride_a = one.stride_b = one.stride_c = 0;
    const ColumnMajorGemm cm = to_column_major(one);
    const cudaDataType ab = operand_type(g.compute);
    // cuBLAS's first operand is our B, its second our A (the transpose trick).
    check_cublas(cublasGemmBatchedEx(handle, cm.transa, cm.transb, cm.m, cm.n, cm.k, &g.alpha,
                                     b_ptrs, ab, cm.lda, a_ptrs, ab, cm.ldb, &g.beta,
                                     reinterpret_cast<void* const*>(c_ptrs), CUDA_R_32F, cm.ldc,
                                     cm.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmBatchedEx (grouped gemm)");
}

}  // namespace moetrain::cuda
