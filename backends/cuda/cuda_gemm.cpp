// CudaDevice::gemm with cuBLAS (cublas_calls.h), and the cuBLAS products the grouped GEMM
// (kernels_cuda/grouped_gemm.cu) queues, on the device stream.
#include "cuda/cublas_calls.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_device.h"
#include "shared/gemm_dtypes.h"

namespace moetrain::cuda {

namespace {
// Elements a strided-batched row-major operand spans: (batch-1)*stride + (rows-1)*ld + cols.
int64_t span(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
    return gemm_span(batch, stride, rows, cols, ld);
}
}  // namespace

// compute = bf16 / f16: cuBLAS multiplies 16-bit A and B directly; an f32 operand is first
// converted to `compute` (round_operand) over its whole span into the context scratch, so its
// ld and batch stride stay as they are.
void CudaDevice::gemm_impl(const GemmArgs& g) {
    const int64_t a_rows = g.ta == Trans::N ? g.m : g.k, a_cols = g.ta == Trans::N ? g.k : g.m;
    const int64_t b_rows = g.tb == Trans::N ? g.k : g.n, b_cols = g.tb == Trans::N ? g.n : g.k;
    if (g.m == 0 || g.n == 0) return;
    const int64_t na = span(g.batch, g.stride_a, a_rows, a_cols, g.lda);
    const int64_t nb = span(g.batch, g.stride_b, b_rows, b_cols, g.ldb);
    float* c = f32(g.c);
    if (g.compute == DType::f32) {
        const float* a = f32(g.a);
        const float* b = f32(g.b);
        cublas_strided(g, a, b, c);
        return;
    }
    const void* a = raw(g.a);
    const void* b = raw(g.b);
    // 256-byte aligned parts of the scratch for the operands that need converting.
    auto part = [](bool f32, int64_t n) {
        return f32 ? (static_cast<size_t>(n) * 2 + 255) / 256 * 256 : 0;
    };
    const size_t pa = part(g.a.dtype == DType::f32, na), pb = part(g.b.dtype == DType::f32, nb);
    auto* tmp = pa + pb ? static_cast<char*>(scratch(pa + pb)) : nullptr;
    if (pa) {
        round_operand(tmp, g.compute, a, na);
        a = tmp;
    }
    if (pb) {
        round_operand(tmp + pa, g.compute, b, nb);
        b = tmp + pa;
    }
    launched("gemm");
    cublas_strided(g, a, b, c);
}

void CudaDevice::cublas_strided(const GemmArgs& g, const void* a, const void* b, float* c) {
    stream("gemm");
    gemm_strided(ctx_->cublas(), g, a, b, c);
}

void CudaDevice::cublas_batched(const GemmArgs& g, const void* const* a_ptrs,
                                const void* const* b_ptrs, float* const* c_ptrs, int64_t batch) {
    stream("gemm");
    gemm_batched(ctx_->cublas(), g, a_ptrs, b_ptrs, c_ptrs, batch);
}

}  // namespace moetrain::cuda
