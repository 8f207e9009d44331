// The CPU matrix products: one row-major single-precision product through the configured GEMM
// library (oneDNN dnnl_sgemm or cblas_sgemm), used by CpuDevice::gemm and by ops that work on
// tiles (attention; safe inside an OpenMP parallel region, oneDNN then runs the product on the
// calling thread); oneDNN's matmul primitive in f32 and bf16; and the operand packing of the
// 16-bit products (cpu_gemm_pack.cpp).
#pragma once

#include <cstdint>
#include <string>

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

// How the bf16 products (GemmArgs::compute = bf16) run on this CPU:
//  - onednn: oneDNN's bf16 matmul primitive (AMX / AVX512-BF16 / AVX512 brgemm kernels);
//  - widen:  both operands rounded to bf16 and widened to f32, then the f32 GEMM. The product of
//            two bf16 values is exact in f32 and the sums accumulate in f32, the same rounding
//            contract as the bf16 kernels (only the summation order differs).
// The choice is made once per process: `widen` when oneDNN has no bf16 matmul kernel for this
// CPU (e.g. AVX2-only processors: creating the primitive fails), or when the environment says
// MOETRAIN_CPU_BF16_GEMM=widen; `onednn` otherwise (MOETRAIN_CPU_BF16_GEMM=auto, the default).
// With the BLAS provider it is always `widen`. Any other value of the variable is an error.
enum class Bf16Gemm { onednn, widen };
Bf16Gemm bf16_gemm_path();
// Overrides the choice (tests force the fallback on every machine); `onednn` where this CPU has
// no bf16 kernel fails with one line.
void set_bf16_gemm_path(Bf16Gemm path);
// Whether oneDNN has a bf16 matmul kernel for this CPU (probed once).
bool onednn_bf16_available();
// One phrase for `moetrain info`: the path and, for oneDNN, its kernel (e.g.
// "oneDNN bf16 matmul (brg:avx512_core_amx)"), or why the products are widened.
std::string bf16_gemm_description();

#if defined(MOETRAIN_GEMM_ONEDNN)
// The product of bf16 operands (bit patterns) with an f32 C, fp32 accumulation, through
// oneDNN's matmul primitive (AMX / AVX512-BF16 brgemm kernels where the CPU has them).
void matmul_bf16(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                 float* c, int64_t ldc);
#endif

// One stored GEMM operand: `batch` matrices of rows x cols (as stored, before op()) with row
// stride ld and batch stride `stride` (0: one matrix shared by every batch entry), in elements
// of dtype (f32, bf16 or f16).
struct StoredMatrix {
    const void* data = nullptr;
    DType dtype = DType::f32;
    int64_t rows = 0, cols = 0, ld = 0, batch = 1, stride = 0;
};
// Elements of the packed copy of m padded to rows_to x cols_to (>= m.rows x m.cols): one
// matrix when m.stride is 0, else m.batch.
int64_t packed_elements(const StoredMatrix& m, int64_t rows_to, int64_t cols_to);
// Packs m into dst as bf16 bit patterns (f32 rounded to nearest even, bf16 copied), compact
// [rows_to, cols_to] matrices with the padding zeroed; m is f32 or bf16. Returns the packed
// operand (rows_to x cols_to, ld = cols_to, stride = rows_to * cols_to or 0). OpenMP-parallel.
StoredMatrix pack_bf16(const StoredMatrix& m, uint16_t* dst, int64_t rows_to, int64_t cols_to);
// Packs m into dst as f32 values rounded through `compute` (bf16 or f16): a 16-bit m is widened
// exactly, an f32 m is rounded to the nearest `compute` value. OpenMP-parallel.
StoredMatrix pack_rounded_f32(const StoredMatrix& m, DType compute, float* dst);

}  // namespace moetrain::cpu
