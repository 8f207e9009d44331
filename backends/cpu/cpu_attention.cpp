// CPU causal attention (MODEL.md 2; device.h AttnDims), flash-style in row blocks: a task
// takes a block of 64 queries of one head and the keys that block can see, so the score block
// [64 x keys] and its softmax live in per-thread scratch (O(T) per head, nothing of size
// T x T is kept) and every product is one GEMM-library call (cpu_gemm.h) of a useful size.
// Forward: per (batch, head, query block) scores = scale Q K^T, a plain stable softmax over
// the visible keys (the whole row is at hand, no online rescaling), O = P V; saves lse only.
// Backward, per (batch, head), query blocks in order: p = exp(s - lse), ds = p (dO . v - D)
// with D_t = dO_t . O_t, then dQ_block = dS K (owned by the task), dV += P^T dO and
// dK += dS^T Q into the head's own rows: straight into dk / dv when every kv head serves one
// query head, else into per-head partials that are then summed over the group in head order.
// Every output element is produced by one task in a fixed order and each GEMM runs on one
// thread inside an active parallel region: deterministic for any thread count, no atomics.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "cpu/cpu_device.h"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_simd.h"
#include "cpu/cpu_vecmath.h"

namespace moetrain {
namespace {

constexpr int64_t kBlock = 64;  // queries per task

// d with the device length tk_dev[0] added to Tk (device.h AttnDims); the host sizes were
// checked by the front door.
AttnDims resolved(const CpuDevice& dev, const AttnDims& d, const char* op) {
    AttnDims r = d;
    const int64_t extra = dev.device_value(d.tk_dev);
    r.Tk += extra;
    MT_CHECK(r.Tk >= r.Tq && r.Tk <= r.S, op, ": device length ", extra, " makes Tk ", r.Tk,
             ", outside [Tq, S] = [", r.Tq, ", ", r.S, "]");
    return r;
}

// Element offsets into the q/o-shaped [B,Tq,H,hd], k/v-shaped [B,S,K,hd] and lse-shaped
// [B,H,Tq] tensors, their row strides, and the row stride of a score block.
struct Layout {
    const AttnDims& d;
    int64_t qrow(int64_t b, int64_t t, int64_t j) const {
        return ((b * d.Tq + t) * d.H + j) * d.hd;
    }
    int64_t krow(int64_t b, int64_t u, int64_t kvh) const {
        return ((b * d.S + u) * d.K + kvh) * d.hd;
    }
    int64_t lse(int64_t b, int64_t j, int64_t t) const { return (b * d.H + j) * d.Tq + t; }
    int64_t ldq() const { return d.H * d.hd; }
    int64_t ldk() const { return d.K * d.hd; }
    int64_t lds() const { return (d.Tk + 15) / 16 * 16; }  // keys, padded to 64 bytes
};

// Queries t0 .. t0+qb-1 of head j (kv head kvh) and the keys [0, keys) the last one sees.
struct Block {
    int64_t b = 0, j = 0, kvh = 0, t0 = 0, qb = 0, keys = 0;
};

Block query_block(const AttnDims& d, int64_t b, int64_t j, int64_t t0) {
    Block k;
    k.b = b;
    k.j = j;
    k.kvh = j / (d.H / d.K);
    k.t0 = t0;
    k.qb = std::min(kBlock, d.Tq - t0);
    k.keys = std::min(d.Tk, t0 + k.qb + (d.Tk - d.Tq));
    return k;
}

// Keys visible to query row i of the block (>= 1: query t sits at position t + Tk - Tq).
int64_t visible(const AttnDims& d, const Block& k, int64_t i) {
    return std::min(k.keys, k.t0 + i + (d.Tk - d.Tq) + 1);
}

// s [qb x keys] (row stride lds) = scale * Q_block K^T.
void block_products(const AttnDims& d, const Layout& L, const Block& k, const float* a,
                    const float* kv, float scale, float* s) {
    cpu::sgemm(Trans::N, Trans::T, k.qb, k.keys, d.hd, scale, a + L.qrow(k.b, k.t0, k.j), L.ldq(),
               kv + L.krow(k.b, 0, k.kvh), L.ldk(), 0.0f, s, L.lds());
}

// Two blocks of `per_thread` floats for each OpenMP thread, inside the device scratch.
struct ThreadScratch {
    float* base;
    size_t per_thread;
    float* mine(int slot) const {
        return base + (static_cast<size_t>(omp_get_thread_num()) * 2 + slot) * per_thread;
    }
};

}  // namespace

void CpuDevice::attention_fwd_impl(const Tensor& o, const Tensor& lse, const Tensor& q,
                                   const Tensor& k, const Tensor& v, const AttnDims& dims,
                                   float scale) {
    const AttnDims d = resolved(*this, dims, "attention_fwd");
    const auto [po, plse, pq, pk, pv] = f32s(o, lse, q, k, v);
    const Layout L{d};
    const int64_t hd = d.hd, qblocks = (d.Tq + kBlock - 1) / kBlock, tasks = d.B * d.H * qblocks;
    if (tasks == 0) return;
    const size_t per_thread = static_cast<size_t>(kBlock * L.lds());
    const ThreadScratch ts{scratch(per_thread * 2 * static_cast<size_t>(omp_get_max_threads())),
                           per_thread};
#pragma omp parallel
    {
        float* s = ts.mine(0);
        float* inv = ts.mine(1);  // 1 / row sums (kBlock floats)
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < tasks; ++task) {
            const Block blk = query_block(d, task / (d.H * qblocks), (task / qblocks) % d.H,
                                          (task % qblocks) * kBlock);
            block_products(d, L, blk, pq, pk, scale, s);
            for (int64_t i = 0; i < blk.qb; ++i) {
                float* row = s + i * L.lds();
                const int64_t n = visible(d, blk, i);
                const float m = cpu::lane_max(row, n);
                const float l = cpu::lane_sum<float>(
                    n, [&](int64_t c) { return row[c] = cpu::exp_f32(row[c] - m); });
                std::fill(row + n, row + blk.keys, 0.0f);
                inv[i] = 1.0f / l;
                plse[L.lse(blk.b, blk.j, blk.t0 + i)] = m + std::log(l);
            }
            float* ob = po + L.qrow(blk.b, blk.t0, blk.j);
            cpu::sgemm(Trans::N, Trans::N, blk.qb, hd, blk.keys, 1.0f, s, L.lds(),
                       pv + L.krow(blk.b, 0, blk.kvh), L.ldk(), 0.0f, ob, L.ldq());
            for (int64_t i = 0; i < blk.qb; ++i) {
                float* orow = ob + i * L.ldq();
                const float r = inv[i];
#pragma omp simd
                for (int64_t c = 0; c < hd; ++c) orow[c] *= r;
            }
        }
    }
}

void CpuDevice::attention_bwd_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                   const Tensor& dout, const Tensor& q, const Tensor& k,
                                   const Tensor& v, const Tensor& o, const Tensor& lse,
                                   const AttnDims& dims, float scale) {
    const AttnDims d = resolved(*this, dims, "attention_bwd");
    const auto [pdq, pdk, pdv, pdo, pq, pk, pv, po, plse] = f32s(dq, dk, dv, dout, q, k, v, o, lse);
    const Layout L{d};
    const int64_t hd = d.hd, group = d.H / d.K, nrows = d.B * d.H * d.Tq;

    // Scratch: D [B,H,Tq]; with group > 1 the per-head partials dK_j, dV_j [B,H,Tk,hd]; then
    // two score-sized blocks per thread.
    const size_t n_part = group > 1 ? static_cast<size_t>(d.B * d.H * d.Tk * hd) : 0;
    const size_t per_thread = static_cast<size_t>(kBlock * L.lds());
    const size_t shared = static_cast<size_t>(nrows) + 2 * n_part;
    float* base = scratch(shared + per_thread * 2 * static_cast<size_t>(omp_get_max_threads()));
    float* D = base;
    float* part_k = base + nrows;
    float* part_v = part_k + n_part;
    const ThreadScratch ts{base + shared, per_thread};

#pragma omp parallel
    {
        // D[b,j,t] = dO . O, laid out like lse.
#pragma omp for schedule(static)
        for (int64_t i = 0; i < nrows; ++i) {
            const int64_t t = i % d.Tq, j = (i / d.Tq) % d.H, b = i / (d.Tq * d.H);
            const float* a = pdo + L.qrow(b, t, j);
            const float* c = po + L.qrow(b, t, j);
            D[i] = cpu::lane_sum<float>(hd, [&](int64_t x) { return a[x] * c[x]; });
        }
        float* p = ts.mine(0);
        float* ds = ts.mine(1);
        // One task per (b, head): all its query blocks in order.
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < d.B * d.H; ++task) {
            const int64_t b = task / d.H, j = task % d.H, kvh = j / group;
            // Where this head's dK / dV rows go: the outputs themselves (group 1, rows >= Tk
            // zeroed too) or the head's partials.
            float* dk_dst = group > 1 ? part_k + static_cast<size_t>(task * d.Tk * hd)
                                      : pdk + L.krow(b, 0, kvh);
            float* dv_dst = group > 1 ? part_v + static_cast<size_t>(task * d.Tk * hd)
                                      : pdv + L.krow(b, 0, kvh);
            const int64_t ld_kv = group > 1 ? hd : L.ldk(), zero_rows = group > 1 ? d.Tk : d.S;
            for (int64_t u = 0; u < zero_rows; ++u) {
                std::fill_n(dk_dst + u * ld_kv, hd, 0.0f);
                std::fill_n(dv_dst + u * ld_kv, hd, 0.0f);
            }
            for (int64_t t0 = 0; t0 < d.Tq; t0 += kBlock) {
                const Block blk = query_block(d, b, j, t0);
                block_products(d, L, blk, pq, pk, scale, p);   // s
                block_products(d, L, blk, pdo, pv, 1.0f, ds);  // dO V^T
                const int64_t row0 = L.lse(b, j, t0);
                for (int64_t i = 0; i < blk.qb; ++i) {
                    float* pr = p + i * L.lds();
                    float* dr = ds + i * L.lds();
                    const int64_t n = visible(d, blk, i);
                    const float l = plse[row0 + i], Di = D[row0 + i];
#pragma omp simd
                    for (int64_t c = 0; c < n; ++c) {
                        pr[c] = cpu::exp_f32(pr[c] - l);
                        dr[c] = pr[c] * (dr[c] - Di) * scale;
                    }
                    std::fill(pr + n, pr + blk.keys, 0.0f);
                    std::fill(dr + n, dr + blk.keys, 0.0f);
                }
                const float* qb = pq + L.qrow(b, t0, j);
                const float* dob = pdo + L.qrow(b, t0, j);
                cpu::sgemm(Trans::N, Trans::N, blk.qb, hd, blk.keys, 1.0f, ds, L.lds(),
                           pk + L.krow(b, 0, kvh), L.ldk(), 0.0f, pdq + L.qrow(b, t0, j), L.ldq());
                cpu::sgemm(Trans::T, Trans::N, blk.keys, hd, blk.qb, 1.0f, p, L.lds(), dob, L.ldq(),
                           1.0f, dv_dst, ld_kv);
                cpu::sgemm(Trans::T, Trans::N, blk.keys, hd, blk.qb, 1.0f, ds, L.lds(), qb, L.ldq(),
                           1.0f, dk_dst, ld_kv);
            }
        }
        if (group > 1) {
            // dK / dV rows of each kv head: the sum of its query heads' partials, in head
            // order; rows >= Tk of the cache are zero.
#pragma omp for schedule(static)
            for (int64_t r = 0; r < d.B * d.K * d.S; ++r) {
                const int64_t u = r % d.S, kvh = (r / d.S) % d.K, b = r / (d.S * d.K);
                float* krow = pdk + L.krow(b, u, kvh);
                float* vrow = pdv + L.krow(b, u, kvh);
                std::fill_n(krow, hd, 0.0f);
                std::fill_n(vrow, hd, 0.0f);
                if (u >= d.Tk) continue;
                for (int64_t j = kvh * group; j < (kvh + 1) * group; ++j) {
                    const size_t off = static_cast<size_t>(((b * d.H + j) * d.Tk + u) * hd);
#pragma omp simd
                    for (int64_t c = 0; c < hd; ++c) {
                        krow[c] += part_k[off + c];
                        vrow[c] += part_v[off + c];
                    }
                }
            }
        }
    }
}

}  // namespace moetrain
