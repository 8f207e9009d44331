// CPU GEMM: every matrix product goes to the GEMM library chosen at configure time
// (cmake/MoetrainGemmProvider.cmake): oneDNN's row-major dnnl_sgemm when MOETRAIN_GEMM_ONEDNN
// (or its matmul primitive for the shapes of cpu::matmul_preferred), else cblas_sgemm.
// Strided-batched products are a loop of library calls.
#include <algorithm>

#include "cpu/cpu_device.h"
#include "cpu/cpu_gemm.h"

#if defined(MOETRAIN_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#elif defined(MOETRAIN_GEMM_CBLAS)
#include <cblas.h>
#else
#error "no GEMM provider: define MOETRAIN_GEMM_ONEDNN or MOETRAIN_GEMM_CBLAS"
#endif

namespace moetrain {
namespace {

// Elements spanned by one stored operand of `rows` x `cols` (as stored) with row stride ld.
int64_t extent(int64_t rows, int64_t cols, int64_t ld) {
    return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
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

void CpuDevice::gemm(const GemmArgs& g) {
    check_sizes("gemm", {g.m, g.n, g.k, g.stride_a, g.stride_b, g.stride_c});
    MT_CHECK(g.batch >= 1, "gemm: batch ", g.batch, " < 1");
    // Stored shapes: A is [m,k] (N) or [k,m] (T); B is [k,n] (N) or [n,k] (T); C is [m,n].
    const int64_t a_rows = g.ta == Trans::N ? g.m : g.k, a_cols = g.ta == Trans::N ? g.k : g.m;
    const int64_t b_rows = g.tb == Trans::N ? g.k : g.n, b_cols = g.tb == Trans::N ? g.n : g.k;
    MT_CHECK(g.lda >= std::max<int64_t>(1, a_cols), "gemm: lda ", g.lda, " < ", a_cols);
    MT_CHECK(g.ldb >= std::max<int64_t>(1, b_cols), "gemm: ldb ", g.ldb, " < ", b_cols);
    MT_CHECK(g.ldc >= std::max<int64_t>(1, g.n), "gemm: ldc ", g.ldc, " < ", g.n);
    if (g.m == 0 || g.n == 0) return;
    const int64_t last = g.batch - 1;
    float* c = f32(g.c, last * g.stride_c + extent(g.m, g.n, g.ldc), "gemm", "c");
    if (g.k == 0) {  // C = beta * C (alpha * empty product)
        for (int64_t i = 0; i < g.batch; ++i)
            for (int64_t r = 0; r < g.m; ++r) {
                float* row = c + i * g.stride_c + r * g.ldc;
                for (int64_t j = 0; j < g.n; ++j) row[j] = g.beta == 0.0f ? 0.0f : g.beta * row[j];
            }
        return;
    }
    const float* a = f32(g.a, last * g.stride_a + extent(a_rows, a_cols, g.lda), "gemm", "a");
    const float* b = f32(g.b, last * g.stride_b + extent(b_rows, b_cols, g.ldb), "gemm", "b");
    const auto product = cpu::matmul_preferred(g.ta, g.tb, g.m, g.n, g.k) ? cpu::matmul : cpu::sgemm;
    for (int64_t i = 0; i < g.batch; ++i)
        product(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a + i * g.stride_a, g.lda, b + i * g.stride_b,
                g.ldb, g.beta, c + i * g.stride_c, g.ldc);
}

}  // namespace moetrain
