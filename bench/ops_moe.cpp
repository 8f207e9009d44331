// Microbenchmarks: the MoE machinery of one moe-mini layer (N = 2048 tokens, E = 16 experts,
// top-4, D = 512): router forward / backward, the stable sort by expert, the row gather and
// the weighted combine (and its backward), and the capacity admission.
#include "ops_bench_util.h"

namespace moetrain::bench {
namespace {

constexpr int64_t kN = 2048, kE = 16, kK = 4, kD = 512;

struct Routed {
    Tensor logits = randn(kN * kE), probs = randn(kN * kE), lse = randn(kN);
    Tensor idx = randint(kN * kK, kE), w = randn(kN * kK), counts = randint(kE, 1);
    Tensor row_token = randint(kN * kK, 1), slot_row = randint(kN * kK, 1);
    Routed() {
        cpu().router_fwd(probs, lse, idx, w, logits, Tensor{}, kN, kE, kK, RouterArgs{});
        cpu().moe_sort(counts, row_token, slot_row, idx, kN, kK, kE);
    }
};

void BM_router_fwd(benchmark::State& st) {
    Routed r;
    for (auto _ : st)
        cpu().router_fwd(r.probs, r.lse, r.idx, r.w, r.logits, Tensor{}, kN, kE, kK, RouterArgs{});
    rates(st, 0, 4.0 * kN * (2 * kE + 2 * kK));
}

void BM_router_bwd(benchmark::State& st) {
    Routed r;
    Tensor dlogits = randn(kN * kE), dw = randn(kN * kK);
    for (auto _ : st)
        cpu().router_bwd(dlogits, dw, r.probs, r.lse, r.logits, r.idx, r.w, r.counts, kN, kE, kK,
                         RouterArgs{}, 0.01f, 0.001f, 1.0f);
    rates(st, 0, 4.0 * kN * (2 * kE + 3 * kK));
}

void BM_moe_capacity(benchmark::State& st) {
    Routed r;
    Tensor kept = randint(kN * kK, 1), all = randint(kE, 1);
    const int64_t capacity = (kN * kK * 5 + 4 * kE - 1) / (4 * kE);  // capacity factor 1.25
    for (auto _ : st) cpu().moe_capacity(kept, all, r.idx, Tensor{}, kN, kK, kE, capacity);
    rates(st, 0, 12.0 * kN * kK);
}

void BM_moe_sort(benchmark::State& st) {
    Routed r;
    for (auto _ : st) cpu().moe_sort(r.counts, r.row_token, r.slot_row, r.idx, kN, kK, kE);
    rates(st, 0, 12.0 * kN * kK);
}

void BM_gather_rows(benchmark::State& st) {
    Routed r;
    Tensor x = randn(kN * kD), xg = randn(kN * kK * kD);
    for (auto _ : st) cpu().gather_rows(xg, x, r.row_token, kN * kK, kD);
    rates(st, 0, 8.0 * kN * kK * kD);
}

void BM_moe_combine(benchmark::State& st) {
    Routed r;
    Tensor rows = randn(kN * kK * kD), y = randn(kN * kD);
    for (auto _ : st) cpu().moe_combine(y, rows, r.slot_row, r.w, kN, kK, kD, true);
    rates(st, 2.0 * kN * kK * kD, 4.0 * (kN * kK * kD + 2 * kN * kD));
}

void BM_moe_combine_bwd(benchmark::State& st) {
    Routed r;
    Tensor rows = randn(kN * kK * kD), drows = randn(kN * kK * kD), dy = randn(kN * kD);
    Tensor dw = randn(kN * kK);
    for (auto _ : st) cpu().moe_combine_bwd(drows, dw, dy, rows, r.slot_row, r.w, kN, kK, kD);
    rates(st, 3.0 * kN * kK * kD, 4.0 * (2 * kN * kK * kD + kN * kD));
}

BENCHMARK(BM_router_fwd)->UseRealTime();
BENCHMARK(BM_router_bwd)->UseRealTime();
BENCHMARK(BM_moe_capacity)->UseRealTime();
BENCHMARK(BM_moe_sort)->UseRealTime();
BENCHMARK(BM_gather_rows)->UseRealTime();
BENCHMARK(BM_moe_combine)->UseRealTime();
BENCHMARK(BM_moe_combine_bwd)->UseRealTime();

}  // namespace
}  // namespace moetrain::bench
