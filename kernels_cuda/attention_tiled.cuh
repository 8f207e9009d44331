// Register-tiled fp32 attention (head_dim 32, 64, 96, 128): the fp32 path's fast kernels, beside
// the scalar ones of attention.cuh (every other head_dim) and the tensor-core ones of
// attention_wmma.cuh (16-bit attention precision). Same function, layouts, causal offset, GQA /
// MQA and device length as attention.cuh; every sum runs in a fixed order (no atomics).
//
// A block is made of row groups of 8 threads (8 consecutive lanes of one warp); a group owns 4
// rows (queries, or keys in dk/dv) and each of its threads computes, register-tiled, a 4 x 4 block
// of a 4-row x 32-column tile product (columns cg, cg + 8, cg + 16, cg + 24 for the thread's
// column group cg) and the same 4 rows x hd / 8 columns (cg * 4 + 32 s + e) of the output
// product. Operands are staged in shared memory (rows of hd + 4 floats, read as float4);
// a tile's probabilities (or dS) go through a per-row-group shared buffer (__syncwarp suffices:
// only the group that wrote them reads them).
//
// Forward: 16 groups (64 queries) per block, key tiles of 32. dq: 8 groups (32 queries), key
// tiles of 32. dk/dv: 8 groups (32 keys of one kv head), query tiles of 32 of the heads that
// share it (split over several blocks for GQA / MQA, then summed in order). D = rowsum(dout * o)
// comes from attention.cuh's attn_bwd_dot_kernel.
#pragma once

#include "attention_shape.cuh"

namespace mtk {

constexpr int kTiledRows = static_cast<int>(kAttnTiledRows);  // rows per thread (and group)
constexpr int kTiledCols = static_cast<int>(kAttnTiledGroupThreads);
constexpr int kTiledTile = static_cast<int>(kAttnTiledTile);  // columns per tile product
constexpr int kTiledLp = static_cast<int>(attn_tiled_lp());   // the P / dS buffer's row stride

__device__ __forceinline__ float lane_of(const float4& v, int e) {
    return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}

// Max / sum over the 8 threads of a row group (xor 4, 2, 1: a fixed order).
__device__ __forceinline__ float group_max(float v) {
    for (int o = kTiledCols / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
    return v;
}
__device__ __forceinline__ float group_sum(float v) {
    for (int o = kTiledCols / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}

// acc[i][j] = sum over c < HD, in order, of a[(r0 + i) * ld + c] * b[(cg + 8 j) * ld + c].
template <int HD>
__device__ __forceinline__ void tile_scores(float (&acc)[kTiledRows][4], const float* a,
                                            const float* b, int r0, int cg) {
    constexpr int ld = HD + 4;
    for (auto& row : acc)
        for (float& x : row) x = 0.0f;
#pragma unroll 2
    for (int c = 0; c < HD; c += 4) {
        float4 av[kTiledRows], bv[4];
#pragma unroll
        for (int i = 0; i < kTiledRows; ++i) av[i] = load_vec<float4>(a + (r0 + i) * ld + c);
#pragma unroll
        for (int j = 0; j < 4; ++j) bv[j] = load_vec<float4>(b + (cg + kTiledCols * j) * ld + c);
#pragma unroll
        for (int i = 0; i < kTiledRows; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                acc[i][j] += av[i].x * bv[j].x;
                acc[i][j] += av[i].y * bv[j].y;
                acc[i][j] += av[i].z * bv[j].z;
                acc[i][j] += av[i].w * bv[j].w;
            }
    }
}

// acc[i][4 s + e] += sum over j < n, in order, of p[(r0 + i) * kTiledLp + j] *
// w[j * ld + cg * 4 + 32 s + e] (n a multiple of 4).
template <int HD>
__device__ __forceinline__ void tile_accumulate(float (&acc)[kTiledRows][HD / 8], const float* p,
                                                const float* w, int r0, int cg, int n) {
    constexpr int ld = HD + 4;
    for (int j = 0; j < n; j += 4) {
        float4 pv[kTiledRows];
#pragma unroll
        for (int i = 0; i < kTiledRows; ++i) pv[i] = load_vec<float4>(p + (r0 + i) * kTiledLp + j);
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
            for (int s = 0; s < HD / 32; ++s) {
                const float4 wv = load_vec<float4>(w + (j + e) * ld + cg * 4 + 32 * s);
#pragma unroll
                for (int i = 0; i < kTiledRows; ++i) {
                    const float pi = lane_of(pv[i], e);
                    acc[i][4 * s + 0] += pi * wv.x;
                    acc[i][4 * s + 1] += pi * wv.y;
                    acc[i][4 * s + 2] += pi * wv.z;
                    acc[i][4 * s + 3] += pi * wv.w;
                }
            }
    }
}

// Rows r0 .. r0 + rows - 1 of a tensor whose row r starts at first + r * stride into shared rows
// of HD + 4 floats, times mul; zeros from row `end` on.
template <int HD>
__device__ __forceinline__ void stage_rows(float* dst, const float* first, int64_t stride,
                                           int64_t r0, int rows, int64_t end, float mul) {
    for (int i = static_cast<int>(threadIdx.x); i < rows * HD; i += static_cast<int>(blockDim.x)) {
        const int j = i / HD, c = i % HD;
        const int64_t r = r0 + j;
        dst[j * (HD + 4) + c] = r < end ? first[r * stride + c] * mul : 0.0f;
    }
}
// Rows t0 .. t0 + rows - 1 of head h of a [B,Tq,H,hd] tensor (q, dout); zeros past Tq.
template <int HD>
__device__ __forceinline__ void stage_query_rows(float* dst, const float* src, const AttnShape& d,
                                                 int64_t b, int64_t h, int64_t t0, int rows,
                                                 float mul) {
    stage_rows<HD>(dst, src + qrow(d, b, 0, h), d.H * d.hd, t0, rows, d.Tq, mul);
}
// Rows u0 .. u0 + rows - 1 of kv head g of a [B,S,K,hd] tensor (k, v); zeros past Tk.
template <int HD>
__device__ __forceinline__ void stage_key_rows(float* dst, const float* src, const AttnShape& d,
                                               int64_t b, int64_t g, int64_t u0, int rows,
                                               float mul) {
    stage_rows<HD>(dst, src + kvrow(d, b, 0, g), d.K * d.hd, u0, rows, d.Tk, mul);
}

// The query rows a block of `groups` row groups serves (forward and dq): the thread's rows
// t0 + r0 + i, their positions (a padding row past Tq takes the block's last position, so its
// sums stay finite; it is never written), the last key its warp (-1: none) and its block need.
struct TiledQueries {
    int64_t b, h, g, t0, pos[kTiledRows], warp_last_key, block_last_key;
    int r0, cg;
};
__device__ __forceinline__ TiledQueries tiled_queries(const AttnShape& d, int groups) {
    TiledQueries w;
    w.b = blockIdx.z;
    w.h = blockIdx.y;
    w.g = w.h / (d.H / d.K);
    w.t0 = static_cast<int64_t>(blockIdx.x) * groups * kTiledRows;
    w.cg = static_cast<int>(threadIdx.x) % kTiledCols;
    w.r0 = static_cast<int>(threadIdx.x) / kTiledCols * kTiledRows;
    const int64_t off = d.Tk - d.Tq;
    const auto last = [&](int64_t t) { return (t < d.Tq - 1 ? t : d.Tq - 1) + off; };
    for (int i = 0; i < kTiledRows; ++i) w.pos[i] = last(w.t0 + w.r0 + i);
    const int warp_rows = static_cast<int>(kWarp) / kTiledCols * kTiledRows;
    const int64_t warp_t0 = w.t0 + w.r0 / warp_rows * warp_rows;
    // A warp of padding rows only (past Tq) skips every tile (it still reaches every barrier).
    w.warp_last_key = warp_t0 < d.Tq ? last(warp_t0 + warp_rows - 1) : -1;
    w.block_last_key = last(w.t0 + groups * kTiledRows - 1);
    return w;
}
// Columns of the P / dS buffer a warp must scan for key tile u0: up to its last key, rounded up
// to a multiple of 4 (the probabilities past a row's position are zeros).
__device__ __forceinline__ int tile_scan(int64_t u0, int64_t warp_last_key) {
    const int64_t n = warp_last_key - u0 + 1;
    return n >= kTiledTile ? kTiledTile : static_cast<int>((n + 3) / 4 * 4);
}

template <int HD>
__global__ void attn_tiled_fwd_kernel(float* __restrict__ o, float* __restrict__ lse,
                                      const float* __restrict__ q, const float* __restrict__ k,
                                      const float* __restrict__ v, AttnShape d, float scale) {
    if (!with_device_length(d)) return;
    constexpr int groups = static_cast<int>(kAttnTiledFwdGroups), ld = HD + 4;
    float* qs = mt_dynamic_shared<float>();  // [64][ld], scaled
    float* ks = qs + groups * kTiledRows * ld;
    float* vs = ks + kTiledTile * ld;
    float* ps = vs + kTiledTile * ld;  // [64][kTiledLp]
    const TiledQueries w = tiled_queries(d, groups);
    stage_query_rows<HD>(qs, q, d, w.b, w.h, w.t0, groups * kTiledRows, scale);
    float m[kTiledRows], l[kTiledRows], acc[kTiledRows][HD / 8];
    for (int i = 0; i < kTiledRows; ++i) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
        for (float& x : acc[i]) x = 0.0f;
    }
    for (int64_t u0 = 0; u0 <= w.block_last_key; u0 += kTiledTile) {
        __syncthreads();  // the previous tile is consumed (and the queries are staged)
        stage_key_rows<HD>(ks, k, d, w.b, w.g, u0, kTiledTile, 1.0f);
        stage_key_rows<HD>(vs, v, d, w.b, w.g, u0, kTiledTile, 1.0f);
        __syncthreads();
        if (u0 > w.warp_last_key) continue;  // warp-uniform
        float s[kTiledRows][4];
        tile_scores<HD>(s, qs, ks, w.r0, w.cg);
        for (int i = 0; i < kTiledRows; ++i) {
            float mx = -INFINITY;
            for (int j = 0; j < 4; ++j) {
                if (u0 + w.cg + kTiledCols * j > w.pos[i]) s[i][j] = -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            // Finite: key 0 is in every row's first tile, and no warp skips that tile.
            const float m_new = fmaxf(m[i], group_max(mx));
            const float corr = expf(m[i] - m_new);
            float rs = 0.0f;
            for (int j = 0; j < 4; ++j) {
                const float p = expf(s[i][j] - m_new);  // 0 for a masked key
                ps[(w.r0 + i) * kTiledLp + w.cg + kTiledCols * j] = p;
                rs += p;
            }
            l[i] = l[i] * corr + rs;
            for (float& x : acc[i]) x *= corr;
            m[i] = m_new;
        }
        __syncwarp();
        tile_accumulate<HD>(acc, ps, vs, w.r0, w.cg, tile_scan(u0, w.warp_last_key));
    }
    for (int i = 0; i < kTiledRows; ++i) {
        const float total = group_sum(l[i]);
        const int64_t t = w.t0 + w.r0 + i;
        if (t >= d.Tq) continue;
        const float inv = 1.0f / total;
        for (int s = 0; s < HD / 32; ++s)
            for (int e = 0; e < 4; ++e)
                o[qrow(d, w.b, t, w.h) + w.cg * 4 + 32 * s + e] = acc[i][4 * s + e] * inv;
        if (w.cg == 0) lse[(w.b * d.H + w.h) * d.Tq + t] = m[i] + logf(total);
    }
}

// dq[t] = scale * sum_u p_u (dout . v_u - D_t) k_u, keys streamed in tiles as in the forward.
template <int HD>
__global__ void attn_tiled_dq_kernel(float* __restrict__ dq, const float* __restrict__ dout,
                                     const float* __restrict__ q, const float* __restrict__ k,
                                     const float* __restrict__ v, const float* __restrict__ lse,
                                     const float* __restrict__ D, AttnShape d, float scale) {
    if (!with_device_length(d)) return;
    constexpr int groups = static_cast<int>(kAttnTiledBwdGroups), ld = HD + 4;
    constexpr int rows = groups * kTiledRows;
    float* qs = mt_dynamic_shared<float>();  // [32][ld], scaled
    float* dos = qs + rows * ld;
    float* ks = dos + rows * ld;
    float* vs = ks + kTiledTile * ld;
    float* dss = vs + kTiledTile * ld;  // [32][kTiledLp]
    const TiledQueries w = tiled_queries(d, groups);
    stage_query_rows<HD>(qs, q, d, w.b, w.h, w.t0, rows, scale);
    stage_query_rows<HD>(dos, dout, d, w.b, w.h, w.t0, rows, 1.0f);
    float L[kTiledRows], Dt[kTiledRows], acc[kTiledRows][HD / 8];
    for (int i = 0; i < kTiledRows; ++i) {
        const int64_t t = w.t0 + w.r0 + i;
        L[i] = t < d.Tq ? lse[(w.b * d.H + w.h) * d.Tq + t] : 0.0f;
        Dt[i] = t < d.Tq ? D[(w.b * d.H + w.h) * d.Tq + t] : 0.0f;
        for (float& x : acc[i]) x = 0.0f;
    }
    for (int64_t u0 = 0; u0 <= w.block_last_key; u0 += kTiledTile) {
        __syncthreads();
        stage_key_rows<HD>(ks, k, d, w.b, w.g, u0, kTiledTile, 1.0f);
        stage_key_rows<HD>(vs, v, d, w.b, w.g, u0, kTiledTile, 1.0f);
        __syncthreads();
        if (u0 > w.warp_last_key) continue;  // warp-uniform
        float s[kTiledRows][4], dp[kTiledRows][4];
        tile_scores<HD>(s, qs, ks, w.r0, w.cg);
        tile_scores<HD>(dp, dos, vs, w.r0, w.cg);
        for (int i = 0; i < kTiledRows; ++i)
            for (int j = 0; j < 4; ++j) {
                const bool seen = u0 + w.cg + kTiledCols * j <= w.pos[i];
                dss[(w.r0 + i) * kTiledLp + w.cg + kTiledCols * j] =
                    seen ? expf(s[i][j] - L[i]) * (dp[i][j] - Dt[i]) * scale : 0.0f;
            }
        __syncwarp();
        tile_accumulate<HD>(acc, dss, ks, w.r0, w.cg, tile_scan(u0, w.warp_last_key));
    }
    for (int i = 0; i < kTiledRows; ++i) {
        const int64_t t = w.t0 + w.r0 + i;
        if (t >= d.Tq) continue;
        for (int s = 0; s < HD / 32; ++s)
            for (int e = 0; e < 4; ++e)
                dq[qrow(d, w.b, t, w.h) + w.cg * 4 + 32 * s + e] = acc[i][4 * s + e];
    }
}

// dk[u], dv[u] for the 32 keys of a block: sums over the queries that see key u, streamed 32 at a
// time, of the heads hh in [split * heads_per, ...) of those sharing kv head g (blockIdx.y = g *
// splits + split; launch.h attn_kv_plan). One split writes dk / dv; several write their
// partial sums to part ([2][splits][B,S,K,hd]: dk's, then dv's), which attention_dkdv_sum
// adds in split order. Rows u in [Tk, S) are written as zeros.
template <int HD>
__global__ void attn_tiled_dkdv_kernel(float* __restrict__ dk, float* __restrict__ dv,
                                       const float* __restrict__ dout, const float* __restrict__ q,
                                       const float* __restrict__ k, const float* __restrict__ v,
                                       const float* __restrict__ lse, const float* __restrict__ D,
                                       AttnShape d, float scale, int64_t splits, int64_t heads_per,
                                       float* __restrict__ part) {
    if (!with_device_length(d)) return;
    constexpr int groups = static_cast<int>(kAttnTiledBwdGroups), ld = HD + 4;
    constexpr int rows = groups * kTiledRows;
    float* ks = mt_dynamic_shared<float>();  // [32][ld]
    float* vs = ks + rows * ld;
    float* qs = vs + rows * ld;  // scaled, as the forward's
    float* dos = qs + kTiledTile * ld;
    float* buf = dos + kTiledTile * ld;  // [32][kTiledLp]: P, then dS
    float* ls = buf + rows * kTiledLp;   // [32]
    float* Ds = ls + kTiledTile;         // [32]
    const int cg = static_cast<int>(threadIdx.x) % kTiledCols;
    const int r0 = static_cast<int>(threadIdx.x) / kTiledCols * kTiledRows;
    const KvSplit heads = kv_split(d, splits, heads_per);
    const int64_t b = blockIdx.z, g = heads.g, off = d.Tk - d.Tq;
    const int64_t u_first = static_cast<int64_t>(blockIdx.x) * rows;
    stage_key_rows<HD>(ks, k, d, b, g, u_first, rows, 1.0f);
    stage_key_rows<HD>(vs, v, d, b, g, u_first, rows, 1.0f);
    float adk[kTiledRows][HD / 8], adv[kTiledRows][HD / 8];
    for (int i = 0; i < kTiledRows; ++i)
        for (int c = 0; c < HD / 8; ++c) adk[i][c] = adv[i][c] = 0.0f;
    // Block-uniform; a block past Tk has no query to stream (t_start >= Tq) and only writes zeros.
    const int64_t t_start = u_first - off > 0 ? u_first - off : 0;  // first query seeing u_first
    for (int64_t h = heads.h_begin; h < heads.h_end; ++h) {
        for (int64_t t0 = t_start; t0 < d.Tq; t0 += kTiledTile) {
            __syncthreads();  // the previous tile is consumed (and the keys are staged)
            stage_query_rows<HD>(qs, q, d, b, h, t0, kTiledTile, scale);
            stage_query_rows<HD>(dos, dout, d, b, h, t0, kTiledTile, 1.0f);
            for (int j = static_cast<int>(threadIdx.x); j < kTiledTile;
                 j += static_cast<int>(blockDim.x)) {
                const bool in = t0 + j < d.Tq;
                ls[j] = in ? lse[(b * d.H + h) * d.Tq + t0 + j] : 0.0f;
                Ds[j] = in ? D[(b * d.H + h) * d.Tq + t0 + j] : 0.0f;
            }
            __syncthreads();
            float s[kTiledRows][4], dp[kTiledRows][4];
            tile_scores<HD>(s, ks, qs, r0, cg);
            tile_scores<HD>(dp, vs, dos, r0, cg);
            for (int i = 0; i < kTiledRows; ++i) {
                const int64_t u = u_first + r0 + i;
                for (int j = 0; j < 4; ++j) {
                    const int c = cg + kTiledCols * j;
                    const int64_t t = t0 + c;
                    const bool seen = t < d.Tq && t + off >= u && u < d.Tk;
                    const float p = seen ? expf(s[i][j] - ls[c]) : 0.0f;
                    buf[(r0 + i) * kTiledLp + c] = p;
                    // dS / scale: the scale is in the staged q that dk sums.
                    dp[i][j] = seen ? p * (dp[i][j] - Ds[c]) : 0.0f;
                }
            }
            __syncwarp();
            tile_accumulate<HD>(adv, buf, dos, r0, cg, kTiledTile);
            __syncwarp();
            for (int i = 0; i < kTiledRows; ++i)
                for (int j = 0; j < 4; ++j)
                    buf[(r0 + i) * kTiledLp + cg + kTiledCols * j] = dp[i][j];
            __syncwarp();
            tile_accumulate<HD>(adk, buf, qs, r0, cg, kTiledTile);
        }
    }
    float* out_k = dkdv_out(dk, part, 0, heads, splits, d);
    float* out_v = dkdv_out(dv, part, 1, heads, splits, d);
    for (int i = 0; i < kTiledRows; ++i) {
        const int64_t u = u_first + r0 + i;
        if (u >= d.S) continue;
        const bool in = u < d.Tk;
        for (int s = 0; s < HD / 32; ++s)
            for (int e = 0; e < 4; ++e) {
                const int c = cg * 4 + 32 * s + e;
                out_k[kvrow(d, b, u, g) + c] = in ? adk[i][4 * s + e] : 0.0f;
                out_v[kvrow(d, b, u, g) + c] = in ? adv[i][4 * s + e] : 0.0f;
            }
    }
}

template <int HD>
void attention_tiled_fwd_hd(Stream s, float* o, float* lse, const float* q, const float* k,
                            const float* v, const AttnShape& d, float scale) {
    MT_LAUNCH(attn_tiled_fwd_kernel<HD>, attn_tiled_fwd_geom(d.Tq, d.H, d.B, HD), s, o, lse, q, k,
              v, d, scale);
}
template <int HD>
void attention_tiled_bwd_hd(Stream s, float* dq, float* dk, float* dv, const float* dout,
                            const float* q, const float* k, const float* v, const float* lse,
                            const float* D, const AttnShape& d, float scale, float* part,
                            int64_t blocks_wanted) {
    if (d.Tq > 0)
        MT_LAUNCH(attn_tiled_dq_kernel<HD>, attn_tiled_bwd_geom(d.Tq, d.H, d.B, HD), s, dq, dout, q,
                  k, v, lse, D, d, scale);
    static_assert(kAttnTiledBwdGroups * kAttnTiledRows == kAttnKvBlockKeys,
                  "attn_kv_plan's keys per block");
    const AttnKvPlan p = attn_kv_plan(d.B, d.S, d.H, d.K, blocks_wanted);
    MT_LAUNCH(attn_tiled_dkdv_kernel<HD>, attn_tiled_bwd_geom(d.S, d.K * p.splits, d.B, HD), s, dk,
              dv, dout, q, k, v, lse, D, d, scale, p.splits, p.heads_per, part);
    attention_dkdv_sum(s, dk, dv, part, d, p.splits);
}

// Calls f(std::integral_constant<int, HD>{}) for hd = 32, 64, 96 or 128 (host code; the callers
// run these kernels for attn_tiled_head_dim only, and any other hd launches nothing).
template <typename F>
void dispatch_tiled_head_dim(int64_t hd, F&& f) {
    if (hd == 32)
        f(std::integral_constant<int, 32>{});
    else if (hd == 64)
        f(std::integral_constant<int, 64>{});
    else if (hd == 96)
        f(std::integral_constant<int, 96>{});
    else if (hd == 128)
        f(std::integral_constant<int, 128>{});
}

// Sizes as moetrain::AttnDims; attn_tiled_head_dim(hd, cc) of the device.
inline void attention_tiled_fwd(Stream s, float* o, float* lse, const float* q, const float* k,
                                const float* v, const AttnShape& d, float scale) {
    if (d.B <= 0 || d.Tq <= 0 || d.H <= 0) return;
    dispatch_tiled_head_dim(d.hd, [&](auto hd) {
        attention_tiled_fwd_hd<decltype(hd)::value>(s, o, lse, q, k, v, d, scale);
    });
}
// D: what attention_bwd_dot wrote; part: attn_kv_part_bytes(B, S, H, K, hd, blocks_wanted)
// of scratch for the split dk / dv sums (unread when attn_kv_plan has one split).
inline void attention_tiled_bwd(Stream s, float* dq, float* dk, float* dv, const float* dout,
                                const float* q, const float* k, const float* v, const float* lse,
                                const float* D, const AttnShape& d, float scale, float* part,
                                int64_t blocks_wanted = kAttnKvBlocksWanted) {
    if (d.B <= 0 || d.H <= 0 || d.S <= 0) return;
    dispatch_tiled_head_dim(d.hd, [&](auto hd) {
        attention_tiled_bwd_hd<decltype(hd)::value>(s, dq, dk, dv, dout, q, k, v, lse, D, d, scale,
                                                    part, blocks_wanted);
    });
}

}  // namespace mtk
