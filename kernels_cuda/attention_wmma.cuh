// Causal attention on the tensor cores (flash-attention-2 style, our own kernels on
// nvcuda::wmma m16n16k16 fragments): the 16-bit attention precision (docs/CUDA.md). Same
// tensors, layouts, GQA / MQA head mapping, KV-cache offset (query t at position t + Tk - Tq) and
// device length (AttnShape::tk_dev) as the scalar kernels of attention.cuh; head_dim 64 or 128.
//
// Rounding (T = __nv_bfloat16 or half): q, k, v, dout are rounded to T when staged in shared
// memory; the probabilities P and the score gradients dS are rounded to T before the products
// that read them; every product accumulates in fp32, and the softmax statistics, the scaling,
// D = rowsum(dout * o), o, lse, dq, dk and dv are fp32.
//
// Forward: a warp owns 16 queries; per tile of keys S = Q K^T (WMMA) goes to shared memory, the
// warp's lanes 0..15 update one query row each (online softmax in fp32) and write P in T, then
// O_tile = P V (WMMA) is folded 16 columns at a time into the lanes' running outputs (lane l
// holds row l % 16, columns 8 * (l / 16) .. + 8 of every 16-column block).
// Backward: dk/dv with 16 keys per warp looping over the query tiles of every head sharing the
// kv head; dq with 16 queries per warp looping over the key tiles. No atomics: every sum runs in
// an order fixed by the shape, so results are bit-deterministic.
#pragma once

#include "attention_shape.cuh"

#if defined(__CUDACC__)
#include <mma.h>
#endif

// The WMMA kernels exist for compute capability >= 8.0 (bf16 fragments); below it their bodies
// are empty and the backend never launches them (attn_kernel in launch.h).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define MT_ATTN_WMMA_BODY 1
#else
#define MT_ATTN_WMMA_BODY 0
#endif

namespace mtk {

template <typename T>
__device__ __forceinline__ T to16(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 to16<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ half to16<half>(float x) {
    return __float2half_rn(x);
}

// Rows [r0, r0 + n) of a [.., rows_total, heads, hd] fp32 tensor at head `head` rounded to T into
// shared memory rows of ld elements (zeros for rows >= limit), by the whole block.
template <typename T, int HD>
__device__ __forceinline__ void stage16(T* dst, int ld, const float* src, int64_t b,
                                        int64_t rows_total, int64_t heads, int64_t head, int64_t r0,
                                        int n, int64_t limit) {
    for (int i = threadIdx.x; i < n * HD; i += blockDim.x) {
        const int j = i / HD, c = i - j * HD;
        const int64_t r = r0 + j;
        dst[j * ld + c] =
            to16<T>(r < limit ? src[((b * rows_total + r) * heads + head) * HD + c] : 0.0f);
    }
}

// The launch.h sizes as compile-time constants of one head_dim (kernel code reads constants; it
// cannot call the host's constexpr functions).
template <int HD>
struct WmmaSizes {
    static constexpr int ld = static_cast<int>(attn_wmma_ld(HD));
    static constexpr int fwd_keys = static_cast<int>(attn_wmma_fwd_keys(HD));
    static constexpr int fwd_warps = static_cast<int>(kAttnWmmaFwdWarps);
    static constexpr size_t fwd_shmem = attn_wmma_fwd_shmem(HD);
    static constexpr int bwd_tile = static_cast<int>(attn_wmma_bwd_tile(HD));
    static constexpr int bwd_warps = static_cast<int>(kAttnWmmaBwdWarps);
};

#if MT_ATTN_WMMA_BODY
namespace wm = nvcuda::wmma;
template <typename T>
using FragA = wm::fragment<wm::matrix_a, 16, 16, 16, T, wm::row_major>;
template <typename T>
using FragBt = wm::fragment<wm::matrix_b, 16, 16, 16, T, wm::col_major>;  // B^T rows in memory
template <typename T>
using FragB = wm::fragment<wm::matrix_b, 16, 16, 16, T, wm::row_major>;
using FragC = wm::fragment<wm::accumulator, 16, 16, 16, float>;

// out[16][N] (fp32, ld N) = A[16][HD] (rows of a, ld lda) * B^T, B^T's rows being the N rows of
// bt (ld ldb): the scores of 16 rows against N rows, by one warp.
template <typename T, int HD, int N>
__device__ __forceinline__ void rows_dot_rows(float* out, const FragA<T> (&a)[HD / 16], const T* bt,
                                              int ldb) {
    for (int n = 0; n < N / 16; ++n) {
        FragC acc;
        wm::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < HD / 16; ++kk) {
            FragBt<T> bf;
            wm::load_matrix_sync(bf, bt + n * 16 * ldb + kk * 16, static_cast<unsigned>(ldb));
            wm::mma_sync(acc, a[kk], bf, acc);
        }
        wm::store_matrix_sync(out + n * 16, acc, N, wm::mem_row_major);
    }
}
#endif

template <typename T, int HD>
__global__ void attn_wmma_fwd_kernel(float* __restrict__ o, float* __restrict__ lse,
                                     const float* __restrict__ q, const float* __restrict__ k,
                                     const float* __restrict__ v, AttnShape d, float scale) {
#if MT_ATTN_WMMA_BODY
    constexpr int LD = WmmaSizes<HD>::ld;
    constexpr int KT = WmmaSizes<HD>::fwd_keys;
    constexpr int W = WmmaSizes<HD>::fwd_warps;
    if (!with_device_length(d)) return;
    unsigned char* smem = mt_dynamic_shared<unsigned char>();
    constexpr size_t region0 = WmmaSizes<HD>::fwd_shmem - 2 * KT * LD * sizeof(T);
    T* qs = reinterpret_cast<T*>(smem);  // [W*16][LD], then reused:
    const int w = static_cast<int>(warp_id()), lane = static_cast<int>(lane_id());
    float* ss = reinterpret_cast<float*>(smem) + w * 16 * KT;  // this warp's S [16][KT]
    T* ps = reinterpret_cast<T*>(smem + W * 16 * KT * sizeof(float)) + w * 16 * KT;  // P [16][KT]
    T* ks = reinterpret_cast<T*>(smem + region0);                                    // [KT][LD]
    T* vs = ks + KT * LD;                                                            // [KT][LD]
    const int64_t b = blockIdx.z, h = blockIdx.y, g = h / (d.H / d.K), off = d.Tk - d.Tq;
    const int64_t t0 = static_cast<int64_t>(blockIdx.x) * W * 16, wt0 = t0 + w * 16;
    const int64_t block_last = (t0 + W * 16 - 1 < d.Tq ? t0 + W * 16 - 1 : d.Tq - 1) + off;
    const int64_t warp_last = (wt0 + 15 < d.Tq ? wt0 + 15 : d.Tq - 1) + off;
    const bool active = wt0 < d.Tq;  // warp-uniform
    stage16<T, HD>(qs, LD, q, b, d.Tq, d.H, h, t0, W * 16, d.Tq);
    __syncthreads();
    FragA<T> qf[HD / 16];
    if (active)
        for (int kk = 0; kk < HD / 16; ++kk)
            wm::load_matrix_sync(qf[kk], qs + w * 16 * LD + kk * 16, LD);
    const int row = lane & 15, cb = (lane >> 4) * 8;  // this lane's output row and columns
    const int64_t pos = wt0 + row + off;
    float acc[HD / 16][8];
    for (auto& blk : acc)
        for (float& x : blk) x = 0.0f;
    float m = -INFINITY, l = 0.0f;  // lanes 0..15: the running max and sum of row `row`
    for (int64_t u0 = 0; u0 <= block_last; u0 += KT) {
        __syncthreads();  // the previous tile is consumed (and every warp holds its q fragments)
        stage16<T, HD>(ks, LD, k, b, d.S, d.K, g, u0, KT, d.Tk);
        stage16<T, HD>(vs, LD, v, b, d.S, d.K, g, u0, KT, d.Tk);
        __syncthreads();
        if (!active || u0 > warp_last) continue;  // warp-uniform
        rows_dot_rows<T, HD, KT>(ss, qf, ks, LD);
        __syncwarp();
        float corr = 1.0f;
        if (lane < 16) {
            const float* srow = ss + row * KT;
            T* prow = ps + row * KT;
            float mx = m;
            for (int j = 0; j < KT; ++j)
                if (u0 + j <= pos) mx = fmaxf(mx, srow[j] * scale);
            // finite: the first tile holds key 0, which every row sees
            corr = expf(m - mx);
            float sum = 0.0f;
            for (int j = 0; j < KT; ++j) {
                const float p = u0 + j <= pos ? expf(srow[j] * scale - mx) : 0.0f;
                sum += p;
                prow[j] = to16<T>(p);
            }
            m = mx;
            l = l * corr + sum;
        }
        corr = __shfl_sync(kFullMask, corr, row);
        __syncwarp();  // P written, S read
        FragA<T> pf[KT / 16];
        for (int kk = 0; kk < KT / 16; ++kk) wm::load_matrix_sync(pf[kk], ps + kk * 16, KT);
        for (int n = 0; n < HD / 16; ++n) {
            FragC of;
            wm::fill_fragment(of, 0.0f);
            for (int kk = 0; kk < KT / 16; ++kk) {
                FragB<T> vf;
                wm::load_matrix_sync(vf, vs + kk * 16 * LD + n * 16, LD);
                wm::mma_sync(of, pf[kk], vf, of);
            }
            wm::store_matrix_sync(ss, of, 16, wm::mem_row_major);  // S is consumed
            __syncwarp();
            for (int e = 0; e < 8; ++e) acc[n][e] = acc[n][e] * corr + ss[row * 16 + cb + e];
            __syncwarp();
        }
    }
    const float lr = __shfl_sync(kFullMask, l, row), mr = __shfl_sync(kFullMask, m, row);
    const int64_t t = wt0 + row;
    if (!active || t >= d.Tq) return;  // no barrier follows
    const float inv = 1.0f / lr;
    for (int n = 0; n < HD / 16; ++n)
        for (int e = 0; e < 8; ++e) o[qrow(d, b, t, h) + n * 16 + cb + e] = acc[n][e] * inv;
    if (lane < 16) lse[(b * d.H + h) * d.Tq + t] = mr + logf(lr);
#endif
}

template <typename T, int HD>
void attention_wmma_fwd_t(Stream s, float* o, float* lse, const float* q, const float* k,
                          const float* v, const AttnShape& d, float scale) {
    MT_LAUNCH((attn_wmma_fwd_kernel<T, HD>),
              attn_wmma_rows(d.Tq, kAttnWmmaFwdWarps, d.H, d.B, attn_wmma_fwd_shmem(HD)), s, o, lse,
              q, k, v, d, scale);
}

// Backward, dq: 16 queries per warp, key tiles streamed. Per tile S = Q K^T and dP = dO V^T
// (WMMA, fp32) go to shared memory; lanes 0..15 form dS = P (dP - D) scale (P = exp(S scale -
// lse), fp32) in T; dq += dS K accumulates in the warp's fragments across the tiles.
template <typename T, int HD>
__global__ void attn_wmma_dq_kernel(float* __restrict__ dq, const float* __restrict__ dout,
                                    const float* __restrict__ q, const float* __restrict__ k,
                                    const float* __restrict__ v, const float* __restrict__ lse,
                                    const float* __restrict__ D, AttnShape d, float scale) {
#if MT_ATTN_WMMA_BODY
    constexpr int LD = WmmaSizes<HD>::ld;
    constexpr int KT = WmmaSizes<HD>::bwd_tile;
    constexpr int W = WmmaSizes<HD>::bwd_warps;
    if (!with_device_length(d)) return;
    const int w = static_cast<int>(warp_id()), lane = static_cast<int>(lane_id());
    T* qs = mt_dynamic_shared<T>();                                    // [W*16][LD]
    T* dos = qs + W * 16 * LD;                                         // [W*16][LD]
    T* ks = dos + W * 16 * LD;                                         // [KT][LD]
    T* vs = ks + KT * LD;                                              // [KT][LD]
    float* ss = reinterpret_cast<float*>(vs + KT * LD) + w * 16 * KT;  // S [16][KT]
    float* dps = ss + W * 16 * KT;                                     // dP [16][KT]
    // dS [16][KT] in T, after both fp32 regions of every warp
    T* dss = reinterpret_cast<T*>(reinterpret_cast<float*>(vs + KT * LD) + 2 * W * 16 * KT) +
             w * 16 * KT;
    const int64_t b = blockIdx.z, h = blockIdx.y, g = h / (d.H / d.K), off = d.Tk - d.Tq;
    const int64_t t0 = static_cast<int64_t>(blockIdx.x) * W * 16, wt0 = t0 + w * 16;
    const int64_t block_last = (t0 + W * 16 - 1 < d.Tq ? t0 + W * 16 - 1 : d.Tq - 1) + off;
    const int64_t warp_last = (wt0 + 15 < d.Tq ? wt0 + 15 : d.Tq - 1) + off;
    const bool active = wt0 < d.Tq;  // warp-uniform
    stage16<T, HD>(qs, LD, q, b, d.Tq, d.H, h, t0, W * 16, d.Tq);
    stage16<T, HD>(dos, LD, dout, b, d.Tq, d.H, h, t0, W * 16, d.Tq);
    __syncthreads();
    FragA<T> qf[HD / 16], df[HD / 16];
    FragC acc[HD / 16];
    const int row = lane & 15, cb = (lane >> 4) * 8;
    const int64_t t = wt0 + row, pos = t + off;
    float L = 0.0f, Dt = 0.0f;
    if (active) {
        for (int kk = 0; kk < HD / 16; ++kk) {
            wm::load_matrix_sync(qf[kk], qs + w * 16 * LD + kk * 16, LD);
            wm::load_matrix_sync(df[kk], dos + w * 16 * LD + kk * 16, LD);
            wm::fill_fragment(acc[kk], 0.0f);
        }
        if (t < d.Tq) {
            L = lse[(b * d.H + h) * d.Tq + t];
            Dt = D[(b * d.H + h) * d.Tq + t];
        }
    }
    for (int64_t u0 = 0; u0 <= block_last; u0 += KT) {
        __syncthreads();
        stage16<T, HD>(ks, LD, k, b, d.S, d.K, g, u0, KT, d.Tk);
        stage16<T, HD>(vs, LD, v, b, d.S, d.K, g, u0, KT, d.Tk);
        __syncthreads();
        if (!active || u0 > warp_last) continue;  // warp-uniform
        rows_dot_rows<T, HD, KT>(ss, qf, ks, LD);
        rows_dot_rows<T, HD, KT>(dps, df, vs, LD);
        __syncwarp();
        if (lane < 16)
            for (int j = 0; j < KT; ++j) {
                const bool valid = t < d.Tq && u0 + j <= pos;
                const float p = valid ? expf(ss[row * KT + j] * scale - L) : 0.0f;
                dss[row * KT + j] = to16<T>(valid ? p * (dps[row * KT + j] - Dt) * scale : 0.0f);
            }
        __syncwarp();
        for (int kk = 0; kk < KT / 16; ++kk) {
            FragA<T> dsf;
            wm::load_matrix_sync(dsf, dss + kk * 16, KT);
            for (int n = 0; n < HD / 16; ++n) {
                FragB<T> kf;
                wm::load_matrix_sync(kf, ks + kk * 16 * LD + n * 16, LD);
                wm::mma_sync(acc[n], dsf, kf, acc[n]);
            }
        }
    }
    if (!active) return;  // no barrier follows
    for (int n = 0; n < HD / 16; ++n) {
        __syncwarp();
        wm::store_matrix_sync(ss, acc[n], 16, wm::mem_row_major);
        __syncwarp();
        if (t < d.Tq)
            for (int e = 0; e < 8; ++e)
                dq[qrow(d, b, t, h) + n * 16 + cb + e] = ss[row * 16 + cb + e];
    }
#endif
}

// Backward, dk / dv: 16 keys per warp; the query tiles of the heads sharing the kv head streamed
// (heads [split * heads_per, ...): blockIdx.y = g * splits + split, launch.h attn_kv_plan; with
// several splits each writes its partial sums to part, added by attention_dkdv_sum). Per tile S^T =
// K Q^T and dP^T = V dO^T (WMMA, fp32) go to shared memory; lanes 0..15 form P^T and dS^T in T; dv
// += P^T dO and dk += dS^T Q accumulate in the warp's fragments. Key rows in [Tk, S) are written as
// zeros.
template <typename T, int HD>
__global__ void attn_wmma_dkdv_kernel(float* __restrict__ dk, float* __restrict__ dv,
                                      const float* __restrict__ dout, const float* __restrict__ q,
                                      const float* __restrict__ k, const float* __restrict__ v,
                                      const float* __restrict__ lse, const float* __restrict__ D,
                                      AttnShape d, float scale, int64_t splits, int64_t heads_per,
                                      float* __restrict__ part) {
#if MT_ATTN_WMMA_BODY
    constexpr int LD = WmmaSizes<HD>::ld;
    constexpr int QT = WmmaSizes<HD>::bwd_tile;
    constexpr int W = WmmaSizes<HD>::bwd_warps;
    if (!with_device_length(d)) return;
    const int w = static_cast<int>(warp_id()), lane = static_cast<int>(lane_id());
    T* ks = mt_dynamic_shared<T>();                                      // [W*16][LD]
    T* vs = ks + W * 16 * LD;                                            // [W*16][LD]
    T* qs = vs + W * 16 * LD;                                            // [QT][LD]
    T* dos = qs + QT * LD;                                               // [QT][LD]
    float* sts = reinterpret_cast<float*>(dos + QT * LD) + w * 16 * QT;  // S^T [16][QT]
    float* dpts = sts + W * 16 * QT;                                     // dP^T [16][QT]
    T* pts = reinterpret_cast<T*>(reinterpret_cast<float*>(dos + QT * LD) + 2 * W * 16 * QT) +
             w * 16 * QT;                                                       // P^T [16][QT]
    T* dsts = pts + W * 16 * QT;                                                // dS^T [16][QT]
    float* ls = reinterpret_cast<float*>(pts - w * 16 * QT + 2 * W * 16 * QT);  // [QT]
    float* Ds = ls + QT;                                                        // [QT]
    const KvSplit heads = kv_split(d, splits, heads_per);
    const int64_t b = blockIdx.z, g = heads.g, off = d.Tk - d.Tq;
    const int64_t u_first = static_cast<int64_t>(blockIdx.x) * W * 16, wu0 = u_first + w * 16;
    const bool active = wu0 < d.Tk;  // warp-uniform
    stage16<T, HD>(ks, LD, k, b, d.S, d.K, g, u_first, W * 16, d.Tk);
    stage16<T, HD>(vs, LD, v, b, d.S, d.K, g, u_first, W * 16, d.Tk);
    const int row = lane & 15, cb = (lane >> 4) * 8;
    const int64_t u = wu0 + row;
    FragC adk[HD / 16], adv[HD / 16];
    for (int n = 0; n < HD / 16; ++n) {
        wm::fill_fragment(adk[n], 0.0f);
        wm::fill_fragment(adv[n], 0.0f);
    }
    // Block-uniform; a block past Tk has no query to stream (t_start >= Tq) and only writes zeros.
    const int64_t t_start = u_first - off > 0 ? u_first - off : 0;  // first query seeing u_first
    for (int64_t h = heads.h_begin; h < heads.h_end; ++h) {
        for (int64_t t0 = t_start; t0 < d.Tq; t0 += QT) {
            __syncthreads();  // the previous tile is consumed (and k, v are staged)
            stage16<T, HD>(qs, LD, q, b, d.Tq, d.H, h, t0, QT, d.Tq);
            stage16<T, HD>(dos, LD, dout, b, d.Tq, d.H, h, t0, QT, d.Tq);
            for (int j = threadIdx.x; j < QT; j += blockDim.x) {
                const bool in = t0 + j < d.Tq;
                ls[j] = in ? lse[(b * d.H + h) * d.Tq + t0 + j] : 0.0f;
                Ds[j] = in ? D[(b * d.H + h) * d.Tq + t0 + j] : 0.0f;
            }
            __syncthreads();
            // warp-uniform: past Tk, or every query of the tile before the warp's first key
            if (!active || t0 + QT - 1 + off < wu0) continue;
            {
                FragA<T> kf[HD / 16];
                for (int kk = 0; kk < HD / 16; ++kk)
                    wm::load_matrix_sync(kf[kk], ks + w * 16 * LD + kk * 16, LD);
                rows_dot_rows<T, HD, QT>(sts, kf, qs, LD);
                for (int kk = 0; kk < HD / 16; ++kk)
                    wm::load_matrix_sync(kf[kk], vs + w * 16 * LD + kk * 16, LD);
                rows_dot_rows<T, HD, QT>(dpts, kf, dos, LD);
            }
            __syncwarp();
            if (lane < 16)
                for (int j = 0; j < QT; ++j) {
                    const bool valid = u < d.Tk && t0 + j < d.Tq && t0 + j + off >= u;
                    const float p = valid ? expf(sts[row * QT + j] * scale - ls[j]) : 0.0f;
                    pts[row * QT + j] = to16<T>(p);
                    dsts[row * QT + j] =
                        to16<T>(valid ? p * (dpts[row * QT + j] - Ds[j]) * scale : 0.0f);
                }
            __syncwarp();
            for (int kk = 0; kk < QT / 16; ++kk) {
                FragA<T> pf, dsf;
                wm::load_matrix_sync(pf, pts + kk * 16, QT);
                wm::load_matrix_sync(dsf, dsts + kk * 16, QT);
                for (int n = 0; n < HD / 16; ++n) {
                    FragB<T> bf;
                    wm::load_matrix_sync(bf, dos + kk * 16 * LD + n * 16, LD);
                    wm::mma_sync(adv[n], pf, bf, adv[n]);
                    wm::load_matrix_sync(bf, qs + kk * 16 * LD + n * 16, LD);
                    wm::mma_sync(adk[n], dsf, bf, adk[n]);
                }
            }
        }
    }
    if (wu0 >= d.S) return;  // no barrier follows
    for (int n = 0; n < HD / 16; ++n)
        for (int which = 0; which < 2; ++which) {
            __syncwarp();
            wm::store_matrix_sync(sts, which == 0 ? adk[n] : adv[n], 16, wm::mem_row_major);
            __syncwarp();
            float* out = dkdv_out(which == 0 ? dk : dv, part, which, heads, splits, d);
            if (u < d.S)
                for (int e = 0; e < 8; ++e)
                    out[kvrow(d, b, u, g) + n * 16 + cb + e] =
                        u < d.Tk ? sts[row * 16 + cb + e] : 0.0f;
        }
#endif
}

template <typename T, int HD>
void attention_wmma_bwd_t(Stream s, float* dq, float* dk, float* dv, const float* dout,
                          const float* q, const float* k, const float* v, const float* lse,
                          const float* D, const AttnShape& d, float scale, float* part,
                          int64_t blocks_wanted) {
    static_assert(kAttnWmmaBwdWarps * 16 == kAttnKvBlockKeys, "attn_kv_plan's keys per block");
    const size_t shmem = attn_wmma_bwd_shmem(HD);
    if (d.Tq > 0)
        MT_LAUNCH((attn_wmma_dq_kernel<T, HD>),
                  attn_wmma_rows(d.Tq, kAttnWmmaBwdWarps, d.H, d.B, shmem), s, dq, dout, q, k, v,
                  lse, D, d, scale);
    const AttnKvPlan p = attn_kv_plan(d.B, d.S, d.H, d.K, blocks_wanted);
    MT_LAUNCH((attn_wmma_dkdv_kernel<T, HD>),
              attn_wmma_rows(d.S, kAttnWmmaBwdWarps, d.K * p.splits, d.B, shmem), s, dk, dv, dout,
              q, k, v, lse, D, d, scale, p.splits, p.heads_per, part);
    attention_dkdv_sum(s, dk, dv, part, d, p.splits);
}

// The backward pass in 16-bit precision `bf16` (else f16), given D = rowsum(dout * o) [B,H,Tq]
// (attention.cuh's attention_bwd_dot); d.hd is 64 or 128. part: attn_kv_part_bytes(B, S, H, K,
// hd, blocks_wanted) of scratch for the split dk / dv sums (unread with one split).
inline void attention_wmma_bwd(Stream s, bool bf16, float* dq, float* dk, float* dv,
                               const float* dout, const float* q, const float* k, const float* v,
                               const float* lse, const float* D, const AttnShape& d, float scale,
                               float* part, int64_t blocks_wanted = kAttnKvBlocksWanted) {
    if (d.B <= 0 || d.H <= 0 || d.S <= 0) return;
    if (bf16)
        d.hd == 64 ? attention_wmma_bwd_t<__nv_bfloat16, 64>(s, dq, dk, dv, dout, q, k, v, lse, D,
                                                             d, scale, part, blocks_wanted)
                   : attention_wmma_bwd_t<__nv_bfloat16, 128>(s, dq, dk, dv, dout, q, k, v, lse, D,
                                                              d, scale, part, blocks_wanted);
    else
        d.hd == 64 ? attention_wmma_bwd_t<half, 64>(s, dq, dk, dv, dout, q, k, v, lse, D, d, scale,
                                                    part, blocks_wanted)
                   : attention_wmma_bwd_t<half, 128>(s, dq, dk, dv, dout, q, k, v, lse, D, d, scale,
                                                     part, blocks_wanted);
}

// The forward pass in 16-bit precision `bf16` (else f16); d.hd is 64 or 128.
inline void attention_wmma_fwd(Stream s, bool bf16, float* o, float* lse, const float* q,
                               const float* k, const float* v, const AttnShape& d, float scale) {
    if (d.B <= 0 || d.Tq <= 0 || d.H <= 0) return;
    if (bf16)
        d.hd == 64 ? attention_wmma_fwd_t<__nv_bfloat16, 64>(s, o, lse, q, k, v, d, scale)
                   : attention_wmma_fwd_t<__nv_bfloat16, 128>(s, o, lse, q, k, v, d, scale);
    else
        d.hd == 64 ? attention_wmma_fwd_t<half, 64>(s, o, lse, q, k, v, d, scale)
                   : attention_wmma_fwd_t<half, 128>(s, o, lse, q, k, v, d, scale);
}

}  // namespace mtk
