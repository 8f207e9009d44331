// Microbenchmarks: the memory-bound row ops of a step at N = 2048 rows: norms (D = 512),
// activations and SwiGLU (N x F = 2048 x 2048), bias add / gradient, cross-entropy over
// V = 8192 logits with the gradient written back, embedding lookup and gradient.
#include "ops_bench_util.h"

namespace moetrain::bench {
namespace {

constexpr int64_t kN = 2048, kD = 512, kF = 2048, kV = 8192;

void BM_layernorm_fwd(benchmark::State& st) {
    Tensor x = randn(kN * kD), y = randn(kN * kD), g = randn(kD), b = randn(kD);
    Tensor mean = randn(kN), rstd = randn(kN);
    for (auto _ : st) cpu().layernorm_fwd(y, mean, rstd, x, g, b, kN, kD, 1e-5f);
    rates(st, 0, 8.0 * kN * kD);
}

void BM_layernorm_bwd(benchmark::State& st) {
    Tensor x = randn(kN * kD), dy = randn(kN * kD), dx = randn(kN * kD), g = randn(kD);
    Tensor dg = randn(kD), db = randn(kD), mean = randn(kN), rstd = randn(kN), y = randn(kN * kD);
    cpu().layernorm_fwd(y, mean, rstd, x, g, Tensor{}, kN, kD, 1e-5f);
    for (auto _ : st) cpu().layernorm_bwd(dx, dg, db, dy, x, g, mean, rstd, kN, kD, true);
    rates(st, 0, 16.0 * kN * kD);
}

void BM_rmsnorm_fwd(benchmark::State& st) {
    Tensor x = randn(kN * kD), y = randn(kN * kD), g = randn(kD), rstd = randn(kN);
    for (auto _ : st) cpu().rmsnorm_fwd(y, rstd, x, g, kN, kD, 1e-5f);
    rates(st, 0, 8.0 * kN * kD);
}

void BM_rmsnorm_bwd(benchmark::State& st) {
    Tensor x = randn(kN * kD), dy = randn(kN * kD), dx = randn(kN * kD), g = randn(kD);
    Tensor dg = randn(kD), rstd = randn(kN), y = randn(kN * kD);
    cpu().rmsnorm_fwd(y, rstd, x, g, kN, kD, 1e-5f);
    for (auto _ : st) cpu().rmsnorm_bwd(dx, dg, dy, x, g, rstd, kN, kD, true);
    rates(st, 0, 16.0 * kN * kD);
}

void BM_act_fwd(benchmark::State& st, Act act) {
    Tensor x = randn(kN * kF), y = randn(kN * kF);
    for (auto _ : st) cpu().act_fwd(act, y, x, kN * kF);
    rates(st, 0, 8.0 * kN * kF);
}

void BM_act_bwd(benchmark::State& st, Act act) {
    Tensor x = randn(kN * kF), dy = randn(kN * kF), dx = randn(kN * kF);
    for (auto _ : st) cpu().act_bwd(act, dx, dy, x, kN * kF);
    rates(st, 0, 12.0 * kN * kF);
}

void BM_swiglu_fwd(benchmark::State& st) {
    Tensor g = randn(kN * kF), u = randn(kN * kF), h = randn(kN * kF);
    for (auto _ : st) cpu().swiglu_fwd(h, g, u, kN * kF);
    rates(st, 0, 12.0 * kN * kF);
}

void BM_swiglu_bwd(benchmark::State& st) {
    Tensor g = randn(kN * kF), u = randn(kN * kF), dh = randn(kN * kF);
    Tensor dg = randn(kN * kF), du = randn(kN * kF);
    for (auto _ : st) cpu().swiglu_bwd(dg, du, dh, g, u, kN * kF);
    rates(st, 0, 20.0 * kN * kF);
}

void BM_add_bias(benchmark::State& st) {
    Tensor y = randn(kN * kF), b = randn(kF);
    for (auto _ : st) cpu().add_bias(y, b, kN, kF);
    rates(st, 0, 8.0 * kN * kF);
}

void BM_bias_grad(benchmark::State& st) {
    Tensor dy = randn(kN * kF), db = randn(kF);
    for (auto _ : st) cpu().bias_grad(db, dy, kN, kF);
    rates(st, 0, 4.0 * kN * kF);
}

void BM_cross_entropy(benchmark::State& st) {
    Tensor logits = randn(kN * kV), losses = randn(kN), targets = randint(kN, kV);
    Tensor fresh = randn(kN * kV);
    for (auto _ : st) {
        st.PauseTiming();
        cpu().copy(logits, fresh);  // the op overwrites its input with the gradient
        st.ResumeTiming();
        cpu().cross_entropy(losses, logits, targets, kN, kV, 1.0f / kN, Tensor{});
    }
    rates(st, 0, 8.0 * kN * kV);
}

void BM_embedding_fwd(benchmark::State& st) {
    Tensor table = randn(kV * kD), out = randn(kN * kD), ids = randint(kN, kV);
    for (auto _ : st) cpu().embedding_fwd(out, table, ids, kN, kD, false);
    rates(st, 0, 8.0 * kN * kD);
}

void BM_embedding_bwd(benchmark::State& st) {
    Tensor dtable = randn(kV * kD), dout = randn(kN * kD), ids = randint(kN, kV);
    for (auto _ : st) cpu().embedding_bwd(dtable, dout, ids, kN, kD);
    rates(st, 0, 12.0 * kN * kD);
}

BENCHMARK(BM_layernorm_fwd)->UseRealTime();
BENCHMARK(BM_layernorm_bwd)->UseRealTime();
BENCHMARK(BM_rmsnorm_fwd)->UseRealTime();
BENCHMARK(BM_rmsnorm_bwd)->UseRealTime();
BENCHMARK_CAPTURE(BM_act_fwd, gelu, Act::gelu)->UseRealTime();
BENCHMARK_CAPTURE(BM_act_bwd, gelu, Act::gelu)->UseRealTime();
BENCHMARK(BM_swiglu_fwd)->UseRealTime();
BENCHMARK(BM_swiglu_bwd)->UseRealTime();
BENCHMARK(BM_add_bias)->UseRealTime();
BENCHMARK(BM_bias_grad)->UseRealTime();
BENCHMARK(BM_cross_entropy)->UseRealTime();
BENCHMARK(BM_embedding_fwd)->UseRealTime();
BENCHMARK(BM_embedding_bwd)->UseRealTime();

}  // namespace
}  // namespace moetrain::bench
