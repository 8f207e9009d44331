// Causal attention, flash-style (no Tq x Tk matrix is stored). q/o: [B,Tq,H,hd];
// k/v: [B,S,K,hd]; lse: [B,H,Tq]. Query t sits at position t + (Tk - Tq); query head h reads
// kv head h / (H/K).
//
// Forward: a block of 4 warps serves 4 consecutive queries of one (batch, head); tiles of kt
// keys/values are staged in shared memory and each warp scores a tile with one key per lane,
// then folds it into its running max / sum / output (online softmax); each lane owns NC of the
// hd output values (NC = 1, 2, 4, 8: the template argument).
// Backward: D = rowsum(dout * o); dq as the forward pass (keys streamed, queries in warps);
// dk/dv with one key per warp and the queries (of every head sharing the kv head) streamed
// through shared memory with one query per lane. Every sum runs in a fixed order: no atomics.
// A device length (AttnShape::tk_dev, a decode step replayed from a graph) is added to Tk by
// each kernel before anything else; the launch geometry depends on Tq and S only.
#pragma once

#include "attention_shape.cuh"

namespace mtk {

// Stages rows [u0, u0 + tile) of the kv head g of k and v (zeros past Tk) into shared memory
// with row strides k_stride / v_stride.
__device__ __forceinline__ void stage_kv(float* ks, int k_stride, float* vs, int v_stride,
                                         const float* k, const float* v, const AttnShape& d,
                                         int64_t b, int64_t g, int64_t u0, int tile) {
    const int hd = static_cast<int>(d.hd);
    for (int i = threadIdx.x; i < tile * hd; i += blockDim.x) {
        int j = i / hd, c = i - j * hd;
        int64_t u = u0 + j;
        bool in = u < d.Tk;
        ks[j * k_stride + c] = in ? k[kvrow(d, b, u, g) + c] : 0.0f;
        vs[j * v_stride + c] = in ? v[kvrow(d, b, u, g) + c] : 0.0f;
    }
}

// Which query row the calling warp serves (forward and dq kernels): batch b, head h, kv head g,
// query t at position pos; active = t < Tq; the last key any warp of the block needs.
struct QueryWarp {
    int64_t b, h, g, t, pos, block_last_key;
    bool active;
};
__device__ __forceinline__ QueryWarp query_warp(const AttnShape& d) {
    QueryWarp w;
    w.b = blockIdx.z;
    w.h = blockIdx.y;
    w.g = w.h / (d.H / d.K);
    const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock;
    const int64_t t_last = t0 + kWarpsPerBlock - 1 < d.Tq ? t0 + kWarpsPerBlock - 1 : d.Tq - 1;
    w.t = t0 + warp_id();
    w.pos = w.t + (d.Tk - d.Tq);
    w.block_last_key = t_last + (d.Tk - d.Tq);
    w.active = w.t < d.Tq;
    return w;
}

template <int NC>
__global__ void attn_fwd_kernel(float* __restrict__ o, float* __restrict__ lse,
                                const float* __restrict__ q, const float* __restrict__ k,
                                const float* __restrict__ v, AttnShape d, float scale, int kt) {
    if (!with_device_length(d)) return;
    const int hd = static_cast<int>(d.hd);
    float* ks = mt_dynamic_shared<float>();  // [kt][hd+1]
    float* vs = ks + kt * (hd + 1);          // [kt][hd]
    float* myq = vs + kt * hd + warp_id() * hd;
    const int lane = static_cast<int>(lane_id());
    const QueryWarp w = query_warp(d);
    const int64_t b = w.b, h = w.h, g = w.g, t = w.t, pos = w.pos;
    const bool active = w.active;
    if (active)
        for (int c = lane; c < hd; c += kWarp) myq[c] = q[qrow(d, b, t, h) + c] * scale;
    float acc[NC];
    for (int i = 0; i < NC; ++i) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int64_t u0 = 0; u0 <= w.block_last_key; u0 += kt) {
        __syncthreads();  // the previous tile is consumed (and myq is written)
        stage_kv(ks, hd + 1, vs, hd, k, v, d, b, g, u0, kt);
        __syncthreads();
        if (!active || u0 > pos) continue;  // warp-uniform
        const bool valid = lane < kt && u0 + lane <= pos;
        const float sc = valid ? row_dot(myq, ks + lane * (hd + 1), hd) : -INFINITY;
        const float m_new = fmaxf(m, warp_max(sc));  // finite: key u0 <= pos is valid
        const float corr = expf(m - m_new);
        const float p = valid ? expf(sc - m_new) : 0.0f;
        l = l * corr + warp_sum(p);
        for (int i = 0; i < NC; ++i) acc[i] *= corr;
        const int jn = pos - u0 + 1 < kt ? static_cast<int>(pos - u0 + 1) : kt;
        for (int j = 0; j < jn; ++j) {
            const float pj = __shfl_sync(kFullMask, p, j);
            for (int i = 0; i < NC; ++i) {
                int c = lane + i * static_cast<int>(kWarp);
                if (c < hd) acc[i] += pj * vs[j * hd + c];
            }
        }
        m = m_new;
    }
    if (!active) return;  // no barrier follows
    const float inv = 1.0f / l;
    for (int i = 0; i < NC; ++i) {
        int c = lane + i * static_cast<int>(kWarp);
        if (c < hd) o[qrow(d, b, t, h) + c] = acc[i] * inv;
    }
    if (lane == 0) lse[(b * d.H + h) * d.Tq + t] = m + logf(l);
}

// D[b,h,t] = dout[b,t,h,:] . o[b,t,h,:], one warp per query row.
__global__ void attn_bwd_dot_kernel(float* __restrict__ D, const float* __restrict__ dout,
                                    const float* __restrict__ o, AttnShape d) {
    const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp_id();
    if (item >= d.B * d.Tq * d.H) return;  // whole warp
    const int64_t h = item % d.H, t = (item / d.H) % d.Tq, b = item / (d.H * d.Tq);
    float acc = 0.0f;
    for (int64_t c = lane_id(); c < d.hd; c += kWarp)
        acc += dout[item * d.hd + c] * o[item * d.hd + c];
    acc = warp_sum(acc);
    if (lane_id() == 0) D[(b * d.H + h) * d.Tq + t] = acc;
}

// dq[t] = scale * sum_u p_u (dout.v_u - D_t) k_u, keys streamed in tiles as in the forward pass.
template <int NC>
__global__ void attn_bwd_dq_kernel(float* __restrict__ dq, const float* __restrict__ dout,
                                   const float* __restrict__ q, const float* __restrict__ k,
                                   const float* __restrict__ v, const float* __restrict__ lse,
                                   const float* __restrict__ D, AttnShape d, float scale, int kt) {
    if (!with_device_length(d)) return;
    const int hd = static_cast<int>(d.hd);
    float* ks = mt_dynamic_shared<float>();  // [kt][hd+1]
    float* vs = ks + kt * (hd + 1);          // [kt][hd+1]
    float* myq = vs + kt * (hd + 1) + warp_id() * hd;
    float* mydo = myq + kWarpsPerBlock * hd;
    const int lane = static_cast<int>(lane_id());
    const QueryWarp w = query_warp(d);
    const int64_t b = w.b, h = w.h, g = w.g, t = w.t, pos = w.pos;
    const bool active = w.active;
    float L = 0.0f, Dt = 0.0f;
    if (active) {
        for (int c = lane; c < hd; c += kWarp) {
            myq[c] = q[qrow(d, b, t, h) + c] * scale;
            mydo[c] = dout[qrow(d, b, t, h) + c];
        }
        L = lse[(b * d.H + h) * d.Tq + t];
        Dt = D[(b * d.H + h) * d.Tq + t];
    }
    float acc[NC];
    for (int i = 0; i < NC; ++i) acc[i] = 0.0f;
    for (int64_t u0 = 0; u0 <= w.block_last_key; u0 += kt) {
        __syncthreads();
        stage_kv(ks, hd + 1, vs, hd + 1, k, v, d, b, g, u0, kt);
        __syncthreads();
        if (!active || u0 > pos) continue;  // warp-uniform
        const bool valid = lane < kt && u0 + lane <= pos;
        float ds = 0.0f;
        if (valid) {
            float p = expf(row_dot(myq, ks + lane * (hd + 1), hd) - L);
            ds = p * (row_dot(mydo, vs + lane * (hd + 1), hd) - Dt) * scale;
        }
        const int jn = pos - u0 + 1 < kt ? static_cast<int>(pos - u0 + 1) : kt;
        for (int j = 0; j < jn; ++j) {
            const float dsj = __shfl_sync(kFullMask, ds, j);
            for (int i = 0; i < NC; ++i) {
                int c = lane + i * static_cast<int>(kWarp);
                if (c < hd) acc[i] += dsj * ks[j * (hd + 1) + c];
            }
        }
    }
    if (!active) return;
    for (int i = 0; i < NC; ++i) {
        int c = lane + i * static_cast<int>(kWarp);
        if (c < hd) dq[qrow(d, b, t, h) + c] = acc[i];
    }
}

// dk[u], dv[u] for one key per warp: sums over the heads sharing kv head g and the queries
// that see key u, streamed qt at a time (one per lane). Rows u >= Tk are written as zeros.
template <int NC>
__global__ void attn_bwd_dkdv_kernel(float* __restrict__ dk, float* __restrict__ dv,
                                     const float* __restrict__ dout, const float* __restrict__ q,
                                     const float* __restrict__ k, const float* __restrict__ v,
                                     const float* __restrict__ lse, const float* __restrict__ D,
                                     AttnShape d, float scale, int qt) {
    if (!with_device_length(d)) return;
    const int hd = static_cast<int>(d.hd);
    float* qs = mt_dynamic_shared<float>();  // [qt][hd+1]
    float* dos = qs + qt * (hd + 1);         // [qt][hd+1]
    float* myk = dos + qt * (hd + 1) + warp_id() * hd;
    float* myv = myk + kWarpsPerBlock * hd;
    float* ls = dos + qt * (hd + 1) + 2 * kWarpsPerBlock * hd;  // [qt]
    float* Ds = ls + qt;                                        // [qt]
    const int lane = static_cast<int>(lane_id());
    const int64_t b = blockIdx.z, g = blockIdx.y, group = d.H / d.K;
    const int64_t u_first = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock;
    const int64_t u = u_first + warp_id();
    const int64_t off = d.Tk - d.Tq;
    const bool active = u < d.Tk;
    if (active)
        for (int c = lane; c < hd; c += kWarp) {
            myk[c] = k[kvrow(d, b, u, g) + c] * scale;
            myv[c] = v[kvrow(d, b, u, g) + c];
        }
    float adk[NC], adv[NC];
    for (int i = 0; i < NC; ++i) adk[i] = adv[i] = 0.0f;
    const int64_t t_start = u_first - off > 0 ? u_first - off : 0;  // first query seeing u_first
    const int64_t heads = u_first < d.Tk ? group : 0;  // block-uniform: blocks past Tk only zero
    for (int64_t hh = 0; hh < heads; ++hh) {
        const int64_t h = g * group + hh;
        for (int64_t t0 = t_start; t0 < d.Tq; t0 += qt) {
            __syncthreads();
            for (int i = threadIdx.x; i < qt * hd; i += blockDim.x) {
                int j = i / hd, c = i - j * hd;
                bool in = t0 + j < d.Tq;
                qs[j * (hd + 1) + c] = in ? q[qrow(d, b, t0 + j, h) + c] : 0.0f;
                dos[j * (hd + 1) + c] = in ? dout[qrow(d, b, t0 + j, h) + c] : 0.0f;
            }
            for (int j = threadIdx.x; j < qt; j += blockDim.x) {
                bool in = t0 + j < d.Tq;
                ls[j] = in ? lse[(b * d.H + h) * d.Tq + t0 + j] : 0.0f;
                Ds[j] = in ? D[(b * d.H + h) * d.Tq + t0 + j] : 0.0f;
            }
            __syncthreads();
            if (!active) continue;  // warp-uniform
            const bool valid = lane < qt && t0 + lane < d.Tq && t0 + lane + off >= u;
            float p = 0.0f, ds = 0.0f;
            if (valid) {
                p = expf(row_dot(myk, qs + lane * (hd + 1), hd) - ls[lane]);
                ds = p * (row_dot(myv, dos + lane * (hd + 1), hd) - Ds[lane]) * scale;
            }
            for (int j = 0; j < qt; ++j) {
                const float pj = __shfl_sync(kFullMask, p, j);
                const float dsj = __shfl_sync(kFullMask, ds, j);
                for (int i = 0; i < NC; ++i) {
                    int c = lane + i * static_cast<int>(kWarp);
                    if (c < hd) {
                        adv[i] += pj * dos[j * (hd + 1) + c];
                        adk[i] += dsj * qs[j * (hd + 1) + c];
                    }
                }
            }
        }
    }
    if (u >= d.S) return;  // no barrier follows
    for (int i = 0; i < NC; ++i) {
        int c = lane + i * static_cast<int>(kWarp);
        if (c < hd) {
            dk[kvrow(d, b, u, g) + c] = active ? adk[i] : 0.0f;
            dv[kvrow(d, b, u, g) + c] = active ? adv[i] : 0.0f;
        }
    }
}

template <int NC>
void attention_fwd_nc(Stream s, float* o, float* lse, const float* q, const float* k,
                      const float* v, const AttnShape& d, float scale) {
    MT_LAUNCH(attn_fwd_kernel<NC>, attn_rows(d.Tq, d.H, d.B, attn_fwd_shmem(d.hd)), s, o, lse, q, k,
              v, d, scale, attn_tile(d.hd));
}

template <int NC>
void attention_bwd_nc(Stream s, float* dq, float* dk, float* dv, const float* dout, const float* q,
                      const float* k, const float* v, const float* lse, const float* D,
                      const AttnShape& d, float scale) {
    const size_t shmem = attn_bwd_shmem(d.hd);
    if (d.Tq > 0)
        MT_LAUNCH(attn_bwd_dq_kernel<NC>, attn_rows(d.Tq, d.H, d.B, shmem), s, dq, dout, q, k, v,
                  lse, D, d, scale, attn_tile(d.hd));
    MT_LAUNCH(attn_bwd_dkdv_kernel<NC>, attn_rows(d.S, d.K, d.B, shmem), s, dk, dv, dout, q, k, v,
              lse, D, d, scale, attn_tile(d.hd));
}

// Sizes as moetrain::AttnDims; hd <= kMaxHeadDim.
inline void attention_fwd(Stream s, float* o, float* lse, const float* q, const float* k,
                          const float* v, const AttnShape& d, float scale) {
    if (d.B <= 0 || d.Tq <= 0 || d.H <= 0 || d.hd <= 0) return;
    dispatch_lane_chunks(d.hd, [&](auto nc) {
        attention_fwd_nc<decltype(nc)::value>(s, o, lse, q, k, v, d, scale);
    });
}

// D[b,h,t] = dout . o for every query row (the scalar and the WMMA backward passes read it).
inline void attention_bwd_dot(Stream s, float* D, const float* dout, const float* o,
                              const AttnShape& d) {
    if (d.B > 0 && d.Tq > 0 && d.H > 0)
        MT_LAUNCH(attn_bwd_dot_kernel, warp_per_item(d.B * d.Tq * d.H), s, D, dout, o, d);
}

// scratch: attn_bwd_scratch_bytes(B, H, Tq).
inline void attention_bwd(Stream s, float* dq, float* dk, float* dv, const float* dout,
                          const float* q, const float* k, const float* v, const float* o,
                          const float* lse, const AttnShape& d, float scale, float* scratch) {
    if (d.B <= 0 || d.H <= 0 || d.hd <= 0 || d.S <= 0) return;
    attention_bwd_dot(s, scratch, dout, o, d);
    dispatch_lane_chunks(d.hd, [&](auto nc) {
        attention_bwd_nc<decltype(nc)::value>(s, dq, dk, dv, dout, q, k, v, lse, scratch, d, scale);
    });
}

}  // namespace mtk
