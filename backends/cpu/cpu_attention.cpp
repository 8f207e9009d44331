// CPU causal attention, flash-style (MODEL.md 2; device.h AttnDims): the forward pass keeps
// an online softmax per query (running max, running sum, output accumulator) over blocks of
// keys and saves only lse [B,H,Tq]; no Tq x Tk matrix exists. The backward pass recomputes
// p = exp(s - lse) and, with D_t = dO_t . O_t, ds = p (dO_t . v_u - D_t), in two race-free
// passes: one over (batch, kv head, key block) that owns its rows of dk / dv, one over
// (batch, query head, query) that owns its row of dq. Each output element is written by one
// task in a fixed order, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_device.h"

namespace moetrain {
namespace {

constexpr int64_t kKeyBlock = 64;  // keys scored at once in the forward pass
constexpr int64_t kBwdBlock = 32;  // keys owned by one task of the dk / dv pass

float dot(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

void axpy(float* y, float a, const float* x, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void check_dims(const AttnDims& d, const char* op) {
    check_sizes(op, {d.B, d.Tq, d.Tk, d.S, d.H, d.K, d.hd});
    MT_CHECK(d.K > 0 && d.H > 0 && d.H % d.K == 0, op, ": n_heads ", d.H,
             " is not a multiple of n_kv_heads ", d.K);
    MT_CHECK(d.Tq <= d.Tk, op, ": Tq ", d.Tq, " > Tk ", d.Tk);
    MT_CHECK(d.Tk <= d.S, op, ": Tk ", d.Tk, " > capacity S ", d.S);
    MT_CHECK(d.hd > 0, op, ": head_dim must be positive");
}

// Row pointers into the q/o-shaped [B,Tq,H,hd] and k/v-shaped [B,S,K,hd] tensors.
struct Layout {
    const AttnDims& d;
    int64_t qrow(int64_t b, int64_t t, int64_t j) const { return ((b * d.Tq + t) * d.H + j) * d.hd; }
    int64_t krow(int64_t b, int64_t u, int64_t kvh) const { return ((b * d.S + u) * d.K + kvh) * d.hd; }
    int64_t lse(int64_t b, int64_t j, int64_t t) const { return (b * d.H + j) * d.Tq + t; }
};

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
    const int64_t group = d.H / d.K, hd = d.hd, tasks = d.B * d.H * d.Tq;
#pragma omp parallel
    {
        std::vector<float> s(kKeyBlock), acc(static_cast<size_t>(hd));
#pragma omp for schedule(dynamic, 4)
        for (int64_t task = 0; task < tasks; ++task) {
            const int64_t t = task % d.Tq, j = (task / d.Tq) % d.H, b = task / (d.Tq * d.H);
            const int64_t kvh = j / group, last = t + d.Tk - d.Tq;
            const float* qv = pq + L.qrow(b, t, j);
            float m = -INFINITY, l = 0.0f;
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (int64_t u0 = 0; u0 <= last; u0 += kKeyBlock) {
                const int64_t u1 = std::min(last + 1, u0 + kKeyBlock);
                float bm = -INFINITY;
                for (int64_t u = u0; u < u1; ++u) {
                    s[u - u0] = scale * dot(qv, pk + L.krow(b, u, kvh), hd);
                    bm = std::max(bm, s[u - u0]);
                }
                if (bm > m) {  // rescale what was accumulated under the old maximum
                    const float r = std::exp(m - bm);
                    l *= r;
                    for (auto& a : acc) a *= r;
                    m = bm;
                }
                for (int64_t u = u0; u < u1; ++u) {
                    const float p = std::exp(s[u - u0] - m);
                    l += p;
                    axpy(acc.data(), p, pv + L.krow(b, u, kvh), hd);
                }
            }
            float* ov = po + L.qrow(b, t, j);
            const float inv = 1.0f / l;
            for (int64_t c = 0; c < hd; ++c) ov[c] = acc[c] * inv;
            plse[L.lse(b, j, t)] = m + std::log(l);
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
    const int64_t group = d.H / d.K, hd = d.hd, shift = d.Tk - d.Tq;

    // D[b,j,t] = dO . O, laid out like lse.
    std::vector<float> D(static_cast<size_t>(d.B * d.H * d.Tq));
    const int64_t nrows = d.B * d.H * d.Tq;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < nrows; ++i) {
        const int64_t t = i % d.Tq, j = (i / d.Tq) % d.H, b = i / (d.Tq * d.H);
        D[i] = dot(pdo + L.qrow(b, t, j), po + L.qrow(b, t, j), hd);
    }

    // dk, dv: one task per (b, kv head, block of keys); rows >= Tk are zeroed.
    const int64_t kblocks = (d.S + kBwdBlock - 1) / kBwdBlock;
    const int64_t kv_tasks = d.B * d.K * kblocks;
#pragma omp parallel
    {
        std::vector<float> ldk(static_cast<size_t>(kBwdBlock * hd)), ldv(ldk.size());
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < kv_tasks; ++task) {
            const int64_t blk = task % kblocks, kvh = (task / kblocks) % d.K, b = task / (kblocks * d.K);
            const int64_t u0 = blk * kBwdBlock, u1 = std::min(d.S, u0 + kBwdBlock);
            const int64_t u1k = std::min(u1, d.Tk);  // keys that exist
            std::fill(ldk.begin(), ldk.end(), 0.0f);
            std::fill(ldv.begin(), ldv.end(), 0.0f);
            for (int64_t j = kvh * group; j < (kvh + 1) * group && u0 < u1k; ++j)
                for (int64_t t = std::max<int64_t>(0, u0 - shift); t < d.Tq; ++t) {
                    const int64_t last = t + shift;
                    const float* qv = pq + L.qrow(b, t, j);
                    const float* dov = pdo + L.qrow(b, t, j);
                    const float lse_t = plse[L.lse(b, j, t)], D_t = D[L.lse(b, j, t)];
                    for (int64_t u = u0; u < std::min(u1k, last + 1); ++u) {
                        const float p = std::exp(scale * dot(qv, pk + L.krow(b, u, kvh), hd) - lse_t);
                        const float ds = p * (dot(dov, pv + L.krow(b, u, kvh), hd) - D_t);
                        axpy(ldv.data() + (u - u0) * hd, p, dov, hd);
                        axpy(ldk.data() + (u - u0) * hd, scale * ds, qv, hd);
                    }
                }
            for (int64_t u = u0; u < u1; ++u) {
                std::copy_n(ldk.data() + (u - u0) * hd, hd, pdk + L.krow(b, u, kvh));
                std::copy_n(ldv.data() + (u - u0) * hd, hd, pdv + L.krow(b, u, kvh));
            }
        }
    }

    // dq: one task per (b, query head, query).
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t i = 0; i < nrows; ++i) {
        const int64_t t = i % d.Tq, j = (i / d.Tq) % d.H, b = i / (d.Tq * d.H);
        const int64_t kvh = j / group, last = t + shift;
        const float* qv = pq + L.qrow(b, t, j);
        const float* dov = pdo + L.qrow(b, t, j);
        const float lse_t = plse[i], D_t = D[i];
        float* dqv = pdq + L.qrow(b, t, j);
        std::fill(dqv, dqv + hd, 0.0f);
        for (int64_t u = 0; u <= last; ++u) {
            const float* kv = pk + L.krow(b, u, kvh);
            const float p = std::exp(scale * dot(qv, kv, hd) - lse_t);
            const float ds = p * (dot(dov, pv + L.krow(b, u, kvh), hd) - D_t);
            axpy(dqv, scale * ds, kv, hd);
        }
    }
}

}  // namespace moetrain
