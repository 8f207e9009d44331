// Microbenchmarks: Device::gemm at the products of one dense-small training step (N = B*T =
// 2048 rows, D = 512, F = 2048, V = 8192): forward x W^T (N,T), input gradients dy W (N,N)
// and weight gradients dy^T x (T,N), which take the matmul-primitive path when tall; then the
// same products with 16-bit operands (GemmArgs::compute = bf16 / f16) as --precision bf16|fp16
// runs them: the weight operand B stored 16-bit for the forward and input-gradient products
// (suffix _w16), both operands f32 (converted by the op) for the weight gradients.
#include "ops_bench_util.h"

namespace moetrain::bench {
namespace {

// compute: GemmArgs::compute; b16: B is stored in the compute type (else f32).
void BM_gemm(benchmark::State& st, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float beta,
             DType compute = DType::f32, bool b16 = false) {
    GemmArgs g{.ta = ta,
               .tb = tb,
               .m = m,
               .n = n,
               .k = k,
               .alpha = 1.0f,
               .a = randn(m * k),
               .lda = ta == Trans::N ? k : m,
               .b = randn(k * n),
               .ldb = tb == Trans::N ? n : k,
               .beta = beta,
               .c = randn(m * n),
               .ldc = n,
               .compute = compute};
    if (b16) {
        Tensor b = cpu().alloc(compute, {k * n});
        cpu().convert(b, g.b);
        g.b = b;
    }
    for (auto _ : st) cpu().gemm(g);
    const double b_bytes = b16 ? 2.0 : 4.0;
    rates(st, 2.0 * m * n * k, 4.0 * (m * k + m * n) + b_bytes * k * n);
}

BENCHMARK_CAPTURE(BM_gemm, fwd_qkvo_2048x512x512, Trans::N, Trans::T, 2048, 512, 512, 0.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, fwd_up_2048x2048x512, Trans::N, Trans::T, 2048, 2048, 512, 0.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, fwd_down_2048x512x2048, Trans::N, Trans::T, 2048, 512, 2048, 1.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, fwd_head_2048x8192x512, Trans::N, Trans::T, 2048, 8192, 512, 0.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, dx_up_2048x512x2048, Trans::N, Trans::N, 2048, 512, 2048, 0.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, dx_down_2048x2048x512, Trans::N, Trans::N, 2048, 2048, 512, 0.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, dx_head_2048x512x8192, Trans::N, Trans::N, 2048, 512, 8192, 0.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, dw_qkvo_512x512x2048, Trans::T, Trans::N, 512, 512, 2048, 1.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, dw_up_2048x512x2048, Trans::T, Trans::N, 2048, 512, 2048, 1.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, dw_down_512x2048x2048, Trans::T, Trans::N, 512, 2048, 2048, 1.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, dw_head_8192x512x2048, Trans::T, Trans::N, 8192, 512, 2048, 1.0f)
    ->UseRealTime();
// moe-mini experts: ~512 rows each (2048 tokens x top-4 / 16 experts), F = 1024.
BENCHMARK_CAPTURE(BM_gemm, expert_fwd_512x1024x512, Trans::N, Trans::T, 512, 1024, 512, 0.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, expert_dw_1024x512x512, Trans::T, Trans::N, 1024, 512, 512, 1.0f)
    ->UseRealTime();
// Batch-1 decode: one row against the LM head and an expert projection (bandwidth bound).
BENCHMARK_CAPTURE(BM_gemm, decode_head_1x8192x512, Trans::N, Trans::T, 1, 8192, 512, 0.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, decode_expert_1x1024x512, Trans::N, Trans::T, 1, 1024, 512, 0.0f)
    ->UseRealTime();
// Two rows (batch-2 decoding): the library path, next to the one-row product of
// backends/cpu/cpu_gemv.cpp above (where the crossover was measured).
BENCHMARK_CAPTURE(BM_gemm, decode_head_2x8192x512, Trans::N, Trans::T, 2, 8192, 512, 0.0f)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_gemm, decode_expert_2x1024x512, Trans::N, Trans::T, 2, 1024, 512, 0.0f)
    ->UseRealTime();

// 16-bit products (bf16: oneDNN's bf16 matmul on AMX / AVX512-BF16; f16: operands rounded
// into f32 scratch, then the f32 path) next to the same product in f32. sfx _w16: B (the
// weight) is stored in the compute type, A is f32; otherwise both are f32.
#define MT_GEMM16(name, ta, tb, m, n, k, beta, b16, sfx)                                  \
    BENCHMARK_CAPTURE(BM_gemm, name##_f32, ta, tb, m, n, k, beta)->UseRealTime();         \
    BENCHMARK_CAPTURE(BM_gemm, name##_bf16##sfx, ta, tb, m, n, k, beta, DType::bf16, b16) \
        ->UseRealTime();                                                                  \
    BENCHMARK_CAPTURE(BM_gemm, name##_f16##sfx, ta, tb, m, n, k, beta, DType::f16, b16)   \
        ->UseRealTime()
MT_GEMM16(square_1024, Trans::N, Trans::N, 1024, 1024, 1024, 0.0f, false, );
MT_GEMM16(fwd_up_2048x2048x512, Trans::N, Trans::T, 2048, 2048, 512, 0.0f, true, _w16);
MT_GEMM16(dx_up_2048x512x2048, Trans::N, Trans::N, 2048, 512, 2048, 0.0f, true, _w16);
MT_GEMM16(dw_up_2048x512x2048, Trans::T, Trans::N, 2048, 512, 2048, 1.0f, false, );
MT_GEMM16(fwd_head_2048x8192x512, Trans::N, Trans::T, 2048, 8192, 512, 0.0f, true, _w16);
MT_GEMM16(expert_fwd_512x1024x512, Trans::N, Trans::T, 512, 1024, 512, 0.0f, true, _w16);
MT_GEMM16(decode_head_1x8192x512, Trans::N, Trans::T, 1, 8192, 512, 0.0f, true, _w16);
#undef MT_GEMM16

}  // namespace
}  // namespace moetrain::bench
