// Microbenchmarks: the whole-model passes of an optimizer step (gradient zeroing, the squared
// global norm, AdamW) over the 29.9M parameters of dense-small and the 214.5M of moe-mini,
// and a plain host read / copy, the memory-bandwidth yardstick these passes are bound by.
#include <cstring>

#include "ops_bench_util.h"

namespace moetrain::bench {
namespace {

void BM_fill_grads(benchmark::State& st) {
    const int64_t kP = st.range(0);
    Tensor g = randn(kP);
    for (auto _ : st) cpu().fill(g, 0.0f);
    rates(st, 0, 4.0 * kP);
}

void BM_sum_squares(benchmark::State& st) {
    const int64_t kP = st.range(0);
    Tensor g = randn(kP), out = randn(1);
    for (auto _ : st) cpu().sum_squares(out, g, kP, false);
    rates(st, 0, 4.0 * kP);
}

void BM_adamw(benchmark::State& st) {
    const int64_t kP = st.range(0);
    Tensor p = randn(kP, 0.02f, 1), g = randn(kP, 1e-3f, 2), m = randn(kP, 1e-4f, 3);
    Tensor v = randn(kP, 1e-4f, 4), gn = randn(1);
    cpu().sum_squares(gn, g, kP, false);
    cpu().fill(v, 1e-8f);  // a non-negative second moment
    AdamWArgs a;
    a.lr = 1e-4f;
    a.wd = 0.1f;
    a.bc1 = 0.1f;
    a.bc2 = 0.05f;
    for (auto _ : st) cpu().adamw(p, g, m, v, kP, a, gn, 1.0f, 1.0f);
    rates(st, 0, 28.0 * kP);
}

// Host yardsticks (no device op, one thread): a 16-lane sum of the floats, and a memcpy.
void BM_host_read(benchmark::State& st) {
    const int64_t kP = st.range(0);
    std::vector<float> a(static_cast<size_t>(kP), 1.0f);
    for (auto _ : st) {
        float acc[16] = {};
        for (int64_t i = 0; i + 16 <= kP; i += 16)
            for (int j = 0; j < 16; ++j) acc[j] += a[static_cast<size_t>(i + j)];
        benchmark::DoNotOptimize(acc);
    }
    rates(st, 0, 4.0 * kP);
}

void BM_host_copy(benchmark::State& st) {
    const int64_t kP = st.range(0);
    std::vector<float> a(static_cast<size_t>(kP), 1.0f), b(a.size());
    for (auto _ : st) {
        std::memcpy(b.data(), a.data(), a.size() * sizeof(float));
        benchmark::ClobberMemory();
    }
    rates(st, 0, 8.0 * kP);
}

// Every benchmark here runs at two parameter counts, in milliseconds of wall time.
void parameter_counts(benchmark::internal::Benchmark* b) {
    b->Arg(29'900'000)->Arg(214'500'000)->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_fill_grads)->Apply(parameter_counts);
BENCHMARK(BM_sum_squares)->Apply(parameter_counts);
BENCHMARK(BM_adamw)->Apply(parameter_counts);
BENCHMARK(BM_host_read)->Apply(parameter_counts);
BENCHMARK(BM_host_copy)->Apply(parameter_counts);

}  // namespace
}  // namespace moetrain::bench
