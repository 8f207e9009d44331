// Machine yardstick for the MFU numbers: the float32 FMA peak of this CPU (12 independent
// chains of vector FMAs, AVX-512 when the CPU has it, else AVX2), on 1 and on 2 threads.
// The cloud host's turbo varies over time, so it is worth running next to a measurement.
#include <immintrin.h>

#include "ops_bench_util.h"

namespace moetrain::bench {
namespace {

constexpr int kChains = 12;
constexpr int64_t kIters = 1 << 20;

// name(): kChains independent chains of kIters FMAs on vectors V of `lanes` floats, compiled
// for the instruction set `isa`. Returns the FLOPs done (2 per lane per FMA).
#define MT_FMA_LOOP(name, isa, V, lanes, set1, fmadd)                                          \
    __attribute__((target(isa))) double name() {                                               \
        V acc[kChains];                                                                        \
        for (int j = 0; j < kChains; ++j) acc[j] = set1(1.0f + 1e-3f * static_cast<float>(j)); \
        const V b = set1(0.9999999f), c = set1(1e-7f);                                         \
        for (int64_t i = 0; i < kIters; ++i)                                                   \
            for (int j = 0; j < kChains; ++j) acc[j] = fmadd(acc[j], b, c);                    \
        for (int j = 0; j < kChains; ++j) benchmark::DoNotOptimize(acc[j]);                    \
        return 2.0 * lanes * kChains * static_cast<double>(kIters);                            \
    }

MT_FMA_LOOP(fma_loop_avx512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_fmadd_ps)
MT_FMA_LOOP(fma_loop_avx2, "avx2,fma", __m256, 8, _mm256_set1_ps, _mm256_fmadd_ps)

void BM_fma_peak(benchmark::State& st) {
    const bool avx512 = __builtin_cpu_supports("avx512f");
    double flops = 0;
    for (auto _ : st) flops = avx512 ? fma_loop_avx512() : fma_loop_avx2();
    st.SetLabel(avx512 ? "avx512" : "avx2");
    rates(st, flops, 0);  // per thread; the aggregate over threads is the machine peak
}

BENCHMARK(BM_fma_peak)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace moetrain::bench
