// CPU causal attention, flash-style (MODEL.md 2; device.h AttnDims), on tiles of 64 queries x
// 64 keys whose products go through the GEMM library (cpu_gemm.h, one thread per tile).
// Forward: per (batch, head, query block) an online softmax over key blocks (running max,
// running sum, rescaled output accumulator); only lse [B,H,Tq] is saved, no Tq x Tk matrix.
// Backward: with D_t = dO_t . O_t, p = exp(s - lse), ds = p (dO_t . v_u - D_t), two race-free
// passes: one over (batch, kv head, key block) that owns its rows of dk / dv (rows >= Tk are
// zeroed), one over (batch, head, query block) that owns its rows of dq. Every output element
// is produced by one task in a fixed order: deterministic, no atomics.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_simd.h"
#include "cpu/cpu_vecmath.h"

namespace moetrain {
namespace {

constexpr int64_t kBlock = 64;  // queries and keys per tile

void check_dims(const AttnDims& d, const char* op) {
    check_sizes(op, {d.B, d.Tq, d.Tk, d.S, d.H, d.K, d.hd});
    MT_CHECK(d.K > 0 && d.H > 0 && d.H % d.K == 0, op, ": n_heads ", d.H,
             " is not a multiple of n_kv_heads ", d.K);
    MT_CHECK(d.Tq <= d.Tk, op, ": Tq ", d.Tq, " > Tk ", d.Tk);
    MT_CHECK(d.Tk <= d.S, op, ": Tk ", d.Tk, " > capacity S ", d.S);
    MT_CHECK(d.hd > 0, op, ": head_dim must be positive");
}

// Element offsets into the q/o-shaped [B,Tq,H,hd], k/v-shaped [B,S,K,hd] and lse-shaped
// [B,H,Tq] tensors, and their row strides.
struct Layout {
    const AttnDims& d;
    int64_t qrow(int64_t b, int64_t t, int64_t j) const { return ((b * d.Tq + t) * d.H + j) * d.hd; }
    int64_t krow(int64_t b, int64_t u, int64_t kvh) const { return ((b * d.S + u) * d.K + kvh) * d.hd; }
    int64_t lse(int64_t b, int64_t j, int64_t t) const { return (b * d.H + j) * d.Tq + t; }
    int64_t ldq() const { return d.H * d.hd; }
    int64_t ldk() const { return d.K * d.hd; }
};

// One tile: queries t0 .. t0+qb-1 of head j, keys u0 .. u0+kb-1 of kv head kvh.
struct Tile {
    int64_t b, j, kvh, t0, qb, u0, kb;
};

// The query block of task number `task` of the (batch, head, query block) passes; no keys yet.
Tile query_tile(const AttnDims& d, int64_t task) {
    const int64_t qblocks = (d.Tq + kBlock - 1) / kBlock;
    Tile t{};
    t.b = task / (d.H * qblocks);
    t.j = (task / qblocks) % d.H;
    t.kvh = t.j / (d.H / d.K);
    t.t0 = (task % qblocks) * kBlock;
    t.qb = std::min(kBlock, d.Tq - t.t0);
    return t;
}

// Number of keys of the tile that query row i may see (0 .. kb), causal with the KV offset.
int64_t visible(const AttnDims& d, const Tile& t, int64_t i) {
    return std::clamp<int64_t>(t.t0 + i + (d.Tk - d.Tq) - t.u0 + 1, 0, t.kb);
}

// s = scale * Q K^T for the tile, into s [qb, kBlock].
void tile_scores(const AttnDims& d, const Layout& L, const Tile& t, const float* q, const float* k,
                 float scale, float* s) {
    cpu::sgemm(Trans::N, Trans::T, t.qb, t.kb, d.hd, scale, q + L.qrow(t.b, t.t0, t.j), L.ldq(),
               k + L.krow(t.b, t.u0, t.kvh), L.ldk(), 0.0f, s, kBlock);
}

// Backward tile: p = exp(s - lse) (0 where masked), dp = dO V^T, then ds = p (dp - D) * scale
// written over dp. Returns p in `p` and ds in `ds`.
void tile_grads(const AttnDims& d, const Layout& L, const Tile& t, const float* q, const float* k,
                const float* v, const float* dout, const float* lse, const float* D, float scale,
                float* p, float* ds) {
    tile_scores(d, L, t, q, k, scale, p);
    cpu::sgemm(Trans::N, Trans::T, t.qb, t.kb, d.hd, 1.0f, dout + L.qrow(t.b, t.t0, t.j), L.ldq(),
               v + L.krow(t.b, t.u0, t.kvh), L.ldk(), 0.0f, ds, kBlock);
    const int64_t row0 = L.lse(t.b, t.j, t.t0);
    for (int64_t i = 0; i < t.qb; ++i) {
        float* pr = p + i * kBlock;
        float* dr = ds + i * kBlock;
        const int64_t n = visible(d, t, i);
        const float l = lse[row0 + i], Di = D[row0 + i];
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) {
            pr[c] = cpu::exp_f32(pr[c] - l);
            dr[c] = pr[c] * (dr[c] - Di) * scale;
        }
        std::fill(pr + n, pr + t.kb, 0.0f);
        std::fill(dr + n, dr + t.kb, 0.0f);
    }
}

}  // namespace

void CpuDevice::attention_fwd(const Tensor& o, const Tensor& lse, const Tensor& q,
                              const Tensor& k, const Tensor& v, const AttnDims& d, float scale) {
    check_dims(d, "attention_fwd");
    const int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd;
    float* po = f32(o, nq, "attention_fwd", "o");
    float* plse = f32(lse, d.B * d.H * d.Tq, "attention_fwd", "lse");
    const float* pq = f32(q, nq, "attention_fwd", "q");
    const float* pk = f32(k, nk, "attention_fwd", "k");
    const float* pv = f32(v, nk, "attention_fwd", "v");
    const Layout L{d};
    const int64_t hd = d.hd, shift = d.Tk - d.Tq;
    const int64_t qblocks = (d.Tq + kBlock - 1) / kBlock, tasks = d.B * d.H * qblocks;
#pragma omp parallel if (tasks > 1 && d.Tq * d.Tk * d.H * d.hd > cpu::kParallelMin)
    {
        std::vector<float> s(kBlock * kBlock), acc(static_cast<size_t>(kBlock * hd));
        std::vector<float> m(kBlock), l(kBlock);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < tasks; ++task) {
            Tile t = query_tile(d, task);
            const int64_t keys = t.t0 + t.qb + shift;  // keys seen by the last query of the block
            std::fill(m.begin(), m.end(), -INFINITY);
            std::fill(l.begin(), l.end(), 0.0f);
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (t.u0 = 0; t.u0 < keys; t.u0 += kBlock) {
                t.kb = std::min(kBlock, keys - t.u0);
                tile_scores(d, L, t, pq, pk, scale, s.data());
                for (int64_t i = 0; i < t.qb; ++i) {
                    float* sr = s.data() + i * kBlock;
                    const int64_t n = visible(d, t, i);
                    const float bm = cpu::lane_max(sr, n);
                    if (bm > m[i]) {  // rescale what was accumulated under the old maximum
                        const float r = std::exp(m[i] - bm);
                        l[i] *= r;
                        float* ar = acc.data() + i * hd;
                        for (int64_t c = 0; c < hd; ++c) ar[c] *= r;
                        m[i] = bm;
                    }
                    const float mi = m[i];
                    const float rowsum = cpu::lane_sum<float>(
                        n, [&](int64_t c) { return sr[c] = cpu::exp_f32(sr[c] - mi); });
                    std::fill(sr + n, sr + t.kb, 0.0f);
                    l[i] += rowsum;
                }
                cpu::sgemm(Trans::N, Trans::N, t.qb, hd, t.kb, 1.0f, s.data(), kBlock,
                           pv + L.krow(t.b, t.u0, t.kvh), L.ldk(), 1.0f, acc.data(), hd);
            }
            for (int64_t i = 0; i < t.qb; ++i) {
                float* orow = po + L.qrow(t.b, t.t0 + i, t.j);
                const float inv = 1.0f / l[i];
                for (int64_t c = 0; c < hd; ++c) orow[c] = acc[i * hd + c] * inv;
                plse[L.lse(t.b, t.j, t.t0 + i)] = m[i] + std::log(l[i]);
            }
        }
    }
}

void CpuDevice::attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& o, const Tensor& lse,
                              const AttnDims& d, float scale) {
    check_dims(d, "attention_bwd");
    const int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd;
    float* pdq = f32(dq, nq, "attention_bwd", "dq");
    float* pdk = f32(dk, nk, "attention_bwd", "dk");
    float* pdv = f32(dv, nk, "attention_bwd", "dv");
    const float* pdo = f32(dout, nq, "attention_bwd", "dout");
    const float* pq = f32(q, nq, "attention_bwd", "q");
    const float* pk = f32(k, nk, "attention_bwd", "k");
    const float* pv = f32(v, nk, "attention_bwd", "v");
    const float* po = f32(o, nq, "attention_bwd", "o");
    const float* plse = f32(lse, d.B * d.H * d.Tq, "attention_bwd", "lse");
    const Layout L{d};
    const int64_t hd = d.hd, group = d.H / d.K, shift = d.Tk - d.Tq;

    // D[b,j,t] = dO . O, laid out like lse.
    const int64_t nrows = d.B * d.H * d.Tq;
    std::vector<float> D(static_cast<size_t>(nrows));
#pragma omp parallel for schedule(static) if (nq > cpu::kParallelMin)
    for (int64_t i = 0; i < nrows; ++i) {
        const int64_t t = i % d.Tq, j = (i / d.Tq) % d.H, b = i / (d.Tq * d.H);
        const float* a = pdo + L.qrow(b, t, j);
        const float* c = po + L.qrow(b, t, j);
        D[i] = cpu::lane_sum<float>(hd, [&](int64_t x) { return a[x] * c[x]; });
    }

    const int64_t qblocks = (d.Tq + kBlock - 1) / kBlock;
    const bool big = d.Tq * d.Tk * d.H * d.hd > cpu::kParallelMin;  // worth waking the team
    // dk, dv: one task per (b, kv head, block of cache rows); rows >= Tk stay zero.
    const int64_t kblocks = (d.S + kBlock - 1) / kBlock, kv_tasks = d.B * d.K * kblocks;
#pragma omp parallel if (kv_tasks > 1 && big)
    {
        std::vector<float> p(kBlock * kBlock), ds(kBlock * kBlock);
        std::vector<float> dka(static_cast<size_t>(kBlock * hd)), dva(dka.size());
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < kv_tasks; ++task) {
            Tile t{};
            t.b = task / (d.K * kblocks);
            t.kvh = (task / kblocks) % d.K;
            t.u0 = (task % kblocks) * kBlock;
            const int64_t rows = std::min(kBlock, d.S - t.u0);
            t.kb = std::clamp<int64_t>(d.Tk - t.u0, 0, kBlock);
            std::fill(dka.begin(), dka.end(), 0.0f);
            std::fill(dva.begin(), dva.end(), 0.0f);
            const int64_t first_q = std::max<int64_t>(0, t.u0 - shift);  // first query seeing u0
            for (t.j = t.kvh * group; t.kb > 0 && t.j < (t.kvh + 1) * group; ++t.j)
                for (t.t0 = first_q / kBlock * kBlock; t.t0 < d.Tq; t.t0 += kBlock) {
                    t.qb = std::min(kBlock, d.Tq - t.t0);
                    tile_grads(d, L, t, pq, pk, pv, pdo, plse, D.data(), scale, p.data(), ds.data());
                    cpu::sgemm(Trans::T, Trans::N, t.kb, hd, t.qb, 1.0f, p.data(), kBlock,
                               pdo + L.qrow(t.b, t.t0, t.j), L.ldq(), 1.0f, dva.data(), hd);
                    cpu::sgemm(Trans::T, Trans::N, t.kb, hd, t.qb, 1.0f, ds.data(), kBlock,
                               pq + L.qrow(t.b, t.t0, t.j), L.ldq(), 1.0f, dka.data(), hd);
                }
            for (int64_t r = 0; r < rows; ++r) {
                std::copy_n(dka.data() + r * hd, hd, pdk + L.krow(t.b, t.u0 + r, t.kvh));
                std::copy_n(dva.data() + r * hd, hd, pdv + L.krow(t.b, t.u0 + r, t.kvh));
            }
        }
    }

    // dq: one task per (b, head, query block).
    const int64_t q_tasks = d.B * d.H * qblocks;
#pragma omp parallel if (q_tasks > 1 && big)
    {
        std::vector<float> p(kBlock * kBlock), ds(kBlock * kBlock), dqa(static_cast<size_t>(kBlock * hd));
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < q_tasks; ++task) {
            Tile t = query_tile(d, task);
            const int64_t keys = t.t0 + t.qb + shift;
            std::fill(dqa.begin(), dqa.end(), 0.0f);
            for (t.u0 = 0; t.u0 < keys; t.u0 += kBlock) {
                t.kb = std::min(kBlock, keys - t.u0);
                tile_grads(d, L, t, pq, pk, pv, pdo, plse, D.data(), scale, p.data(), ds.data());
                cpu::sgemm(Trans::N, Trans::N, t.qb, hd, t.kb, 1.0f, ds.data(), kBlock,
                           pk + L.krow(t.b, t.u0, t.kvh), L.ldk(), 1.0f, dqa.data(), hd);
            }
            for (int64_t i = 0; i < t.qb; ++i)
                std::copy_n(dqa.data() + i * hd, hd, pdq + L.qrow(t.b, t.t0 + i, t.j));
        }
    }
}

}  // namespace moetrain
