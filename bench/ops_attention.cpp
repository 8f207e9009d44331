// Microbenchmarks: causal attention forward and backward at B=8, T=256, head_dim 64 with
// 8 query heads: multi-head (dense-small, 8 kv heads) and multi-query (moe-mini, 1 kv head).
// FLOPs counted as executed by the causal kernel: 2 (fwd) or 5 (bwd) products of
// ~T*T/2 * hd multiply-adds per head.
#include "ops_bench_util.h"

namespace moetrain::bench {
namespace {

struct AttnData {
    AttnDims d;
    Tensor q, k, v, o, lse, dout, dq, dk, dv;
    explicit AttnData(int64_t kv_heads) : d{8, 256, 256, 256, 8, kv_heads, 64} {
        const int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd;
        q = randn(nq, 1.0f, 1);
        k = randn(nk, 1.0f, 2);
        v = randn(nk, 1.0f, 3);
        dout = randn(nq, 1.0f, 4);
        o = randn(nq, 1.0f, 5);
        dq = randn(nq, 1.0f, 6);
        dk = randn(nk, 1.0f, 7);
        dv = randn(nk, 1.0f, 8);
        lse = randn(d.B * d.H * d.Tq, 1.0f, 9);
        cpu().attention_fwd(o, lse, q, k, v, d, 0.125f);  // a consistent o / lse for backward
    }
    double causal_products() const {  // multiply-adds of one Q K^T-sized product
        return static_cast<double>(d.B * d.H) * d.Tq * (d.Tk + 1) / 2.0 * d.hd;
    }
};

void BM_attention_fwd(benchmark::State& st, int64_t kv_heads) {
    AttnData a(kv_heads);
    for (auto _ : st) cpu().attention_fwd(a.o, a.lse, a.q, a.k, a.v, a.d, 0.125f);
    rates(st, 2.0 * 2.0 * a.causal_products(), 0);
}

void BM_attention_bwd(benchmark::State& st, int64_t kv_heads) {
    AttnData a(kv_heads);
    for (auto _ : st)
        cpu().attention_bwd(a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v, a.o, a.lse, a.d, 0.125f);
    rates(st, 5.0 * 2.0 * a.causal_products(), 0);
}

BENCHMARK_CAPTURE(BM_attention_fwd, mha_8kv, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_attention_fwd, mqa_1kv, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_attention_bwd, mha_8kv, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_attention_bwd, mqa_1kv, 1)->UseRealTime();

}  // namespace
}  // namespace moetrain::bench
