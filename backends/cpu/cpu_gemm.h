// One row-major single-precision matrix product through the configured GEMM library
// (oneDNN dnnl_sgemm or cblas_sgemm). Used by CpuDevice::gemm and by ops that work on tiles
// (attention). Safe to call from inside an OpenMP parallel region: oneDNN then runs the
// product on the calling thread.
#pragma once

#include <cstdint>

#include "moetrain/device.h"

namespace moetrain::cpu {

// C = alpha op(A) op(B) + beta C with op(A) [m,k], op(B) [k,n], C [m,n]; no argument checks.
void sgemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same product through oneDNN's matmul primitive (cpu_matmul.cpp; sgemm with the BLAS
// provider). Call it from the host thread only (not inside a parallel region), for the
// shapes where matmul_preferred() says it is faster.
bool matmul_preferred(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k);
void matmul(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace moetrain::cpu
