// CPU GEMM: every matrix product goes to the GEMM library chosen at configure time
// (cmake/MoetrainGemmProvider.cmake): oneDNN's row-major dnnl_sgemm when MOETRAIN_GEMM_ONEDNN
// (or its matmul primitive for the shapes of cpu::matmul_preferred), else cblas_sgemm.
// Strided-batched products are a loop of library calls. GemmArgs::compute = bf16 / f16: see
// gemm16 below. Exception: one row against a weight's transpose in bf16 (m = 1, Trans::N x
// Trans::T, batch 1: a bf16 model's linear layers at batch-1 decoding) runs the
// matrix-vector product of cpu_gemv.cpp.
#include "cpu/cpu_gemm.h"

#include <algorithm>
#include <bit>

#include "cpu/cpu_device.h"
#include "cpu/cpu_gemv.h"
#include "cpu/cpu_parallel.h"
#include "shared/gemm_dtypes.h"

#if defined(MOETRAIN_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#elif defined(MOETRAIN_GEMM_CBLAS)
#include <cblas.h>
#else
#error "no GEMM provider: define MOETRAIN_GEMM_ONEDNN or MOETRAIN_GEMM_CBLAS"
#endif

namespace moetrain {
namespace {

// 64-byte aligned float count of a scratch part holding `elements` values of `bytes` each.
size_t scratch_floats(int64_t elements, size_t bytes) {
    return (static_cast<size_t>(elements) * bytes + 63) / 64 * 16;
}

// batch products through the f32 library (dnnl_sgemm / cblas_sgemm, or oneDNN's matmul for
// the shapes of matmul_preferred).
void run_f32(const GemmArgs& g, const cpu::StoredMatrix& a, const cpu::StoredMatrix& b, float* c) {
    const auto product =
        cpu::matmul_preferred(g.ta, g.tb, g.m, g.n, g.k) ? cpu::matmul : cpu::sgemm;
    const auto* pa = static_cast<const float*>(a.data);
    const auto* pb = static_cast<const float*>(b.data);
    for (int64_t i = 0; i < g.batch; ++i)
        product(g.ta, g.tb, g.m, g.n, g.k, g.alpha, pa + i * a.stride, a.ld, pb + i * b.stride,
                b.ld, g.beta, c + i * g.stride_c, g.ldc);
}

#if defined(MOETRAIN_GEMM_ONEDNN)
// Rows of C per bf16 matmul call, and the reduction padding of the bf16 products. oneDNN
// JIT-compiles a bf16 primitive per exact shape (~0.5-1 ms, cached by shape), and the MoE
// expert products change m (their token count) and, for the weight gradients, k every step.
// So m is cut into kBf16RowChunk-row calls plus a binary split of the rest (512 + 64 + 4 rows
// for m = 580: at most 9 row counts per (n, k)), and k is padded with zeros to a multiple of
// kBf16KPad (exact: the padding adds 0 * 0 products) when both operands are packed anyway or
// when A is transposed (a weight gradient dy^T x: k is the token count). In the latter case a
// bf16 operand is packed too, so the result does not depend on whether the activation x is
// stored in bf16 or f32 (oneDNN's kernels for an odd k sum in another order).
constexpr int64_t kBf16RowChunk = 512;
constexpr int64_t kBf16KPad = 64;

void gemm_bf16(CpuDevice& dev, const GemmArgs& g, cpu::StoredMatrix a, cpu::StoredMatrix b,
               float* c) {
    const bool pad_k = (a.dtype != DType::bf16 && b.dtype != DType::bf16) ||
                       (g.ta == Trans::T && g.k % kBf16KPad != 0);
    const bool pack_a = pad_k || a.dtype != DType::bf16, pack_b = pad_k || b.dtype != DType::bf16;
    const int64_t k = pad_k ? (g.k + kBf16KPad - 1) / kBf16KPad * kBf16KPad : g.k;
    // Stored shapes with k padded: A [m,k] (N) / [k,m] (T), B [k,n] (N) / [n,k] (T).
    const int64_t a_rows = g.ta == Trans::N ? g.m : k, a_cols = g.ta == Trans::N ? k : g.m;
    const int64_t b_rows = g.tb == Trans::N ? k : g.n, b_cols = g.tb == Trans::N ? g.n : k;
    const size_t fa = pack_a ? scratch_floats(cpu::packed_elements(a, a_rows, a_cols), 2) : 0;
    const size_t fb = pack_b ? scratch_floats(cpu::packed_elements(b, b_rows, b_cols), 2) : 0;
    float* base = fa + fb ? dev.scratch(fa + fb) : nullptr;
    if (pack_a) a = cpu::pack_bf16(a, reinterpret_cast<uint16_t*>(base), a_rows, a_cols);
    if (pack_b) b = cpu::pack_bf16(b, reinterpret_cast<uint16_t*>(base + fa), b_rows, b_cols);
    const auto* pa = static_cast<const uint16_t*>(a.data);
    const auto* pb = static_cast<const uint16_t*>(b.data);
    const int64_t a_row_step = g.ta == Trans::N ? a.ld : 1;  // next row of op(A)
    for (int64_t i = 0; i < g.batch; ++i)
        for (int64_t r0 = 0; r0 < g.m;) {
            const int64_t left = g.m - r0;
            const int64_t rows =
                left >= kBf16RowChunk ? kBf16RowChunk : std::bit_floor(static_cast<uint64_t>(left));
            cpu::matmul_bf16(g.ta, g.tb, rows, g.n, k, g.alpha, pa + i * a.stride + r0 * a_row_step,
                             a.ld, pb + i * b.stride, b.ld, g.beta, c + i * g.stride_c + r0 * g.ldc,
                             g.ldc);
            r0 += rows;
        }
}
#endif

// The 16-bit products: compute = bf16 on the oneDNN path (cpu::bf16_gemm_path()) runs the bf16
// matmul primitive on bf16 operands (an f32 operand is first packed to bf16 in the device
// scratch; gemm_bf16). compute = f16 (no f16 matmul in oneDNN 2.6 on CPUs), and bf16 on the
// widen path (CPUs without a oneDNN bf16 kernel, the BLAS provider, or forced) pack both
// operands as f32 values rounded through `compute` and run the f32 product, which is exact for
// the rounded operands (a product of two 16-bit values fits an f32 mantissa).
void gemm16(CpuDevice& dev, const GemmArgs& g, const cpu::StoredMatrix& a,
            const cpu::StoredMatrix& b, float* c) {
#if defined(MOETRAIN_GEMM_ONEDNN)
    if (g.compute == DType::bf16 && cpu::bf16_gemm_path() == cpu::Bf16Gemm::onednn)
        return gemm_bf16(dev, g, a, b, c);
#endif
    const size_t fa = scratch_floats(cpu::packed_elements(a, a.rows, a.cols), 4);
    float* base = dev.scratch(fa + scratch_floats(cpu::packed_elements(b, b.rows, b.cols), 4));
    run_f32(g, cpu::pack_rounded_f32(a, g.compute, base),
            cpu::pack_rounded_f32(b, g.compute, base + fa), c);
}

}  // namespace

namespace cpu {
void sgemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#if defined(MOETRAIN_GEMM_ONEDNN)
    dnnl_status_t st = dnnl_sgemm(ta == Trans::N ? 'N' : 'T', tb == Trans::N ? 'N' : 'T', m, n, k,
                                  alpha, a, lda, b, ldb, beta, c, ldc);
    MT_CHECK(st == dnnl_success, "gemm: oneDNN sgemm failed with status ", static_cast<int>(st),
             " (m=", m, " n=", n, " k=", k, ")");
#else
    cblas_sgemm(CblasRowMajor, ta == Trans::N ? CblasNoTrans : CblasTrans,
                tb == Trans::N ? CblasNoTrans : CblasTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
                static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
#endif
}
}  // namespace cpu

void CpuDevice::gemm_impl(const GemmArgs& g) {
    // Stored shapes: A is [m,k] (N) or [k,m] (T); B is [k,n] (N) or [n,k] (T); C is [m,n].
    const int64_t a_rows = g.ta == Trans::N ? g.m : g.k, a_cols = g.ta == Trans::N ? g.k : g.m;
    const int64_t b_rows = g.tb == Trans::N ? g.k : g.n, b_cols = g.tb == Trans::N ? g.n : g.k;
    if (g.m == 0 || g.n == 0) return;
    float* c = f32(g.c);
    if (g.k == 0) {  // C = beta * C (alpha * empty product)
        for (int64_t i = 0; i < g.batch; ++i)
            for (int64_t r = 0; r < g.m; ++r) {
                float* row = c + i * g.stride_c + r * g.ldc;
                for (int64_t j = 0; j < g.n; ++j) row[j] = g.beta == 0.0f ? 0.0f : g.beta * row[j];
            }
        return;
    }
    auto stored = [&](const Tensor& t, int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
        return cpu::StoredMatrix{raw(t), t.dtype, rows, cols, ld, g.batch, stride};
    };
    const cpu::StoredMatrix a = stored(g.a, a_rows, a_cols, g.lda, g.stride_a);
    const cpu::StoredMatrix b = stored(g.b, b_rows, b_cols, g.ldb, g.stride_b);
    if (cpu::gemv_applies(g))
        cpu::gemv(g, a, b, c, scratch(static_cast<size_t>(g.k)));
    else if (g.compute == DType::f32)
        run_f32(g, a, b, c);
    else
        gemm16(*this, g, a, b, c);
}

// The epilogue after the product, as add_bias, act_fwd / act_bwd and bias_grad
// (Device::gemm_epilogue_unfused).
void CpuDevice::gemm_epilogue_impl(const GemmArgs& g, const GemmEpilogue& e) {
    gemm_epilogue_unfused(g, e);
}

}  // namespace moetrain
