// Split-K decode attention: the forward of one query per (batch, head) over a KV cache (Tq == 1,
// capacity S > 1; mtk::attn_decode), the step `generate` repeats for every token. The query sits
// at position Tk - 1 and sees every cached key u < Tk. q/o: [B,1,H,hd]; k/v: [B,S,K,hd];
// lse: [B,H,1].
//
// The forward kernels of attention.cuh / attention_wmma.cuh give each (batch, head) one block
// that walks all Tk keys alone: at batch 1 that is H blocks on a GPU of 100+ SMs, each reading
// the cache serially. Here the capacity S is cut into chunks (launch.h attn_decode_plan): one
// warp scores one chunk's keys for up to `rows` query heads that share a kv head (GQA / MQA
// read each key once for all of them), keeping a running max, sum and unnormalised output per
// head (online softmax), and writes that partial to scratch. The combine kernel then merges a
// row's chunks in chunk order: M = max m_s, L = sum l_s e^(m_s - M), o = sum acc_s e^(m_s - M)
// / L, lse = M + log L. Every sum runs in a fixed order (no atomics), so results are
// bit-identical run to run. fp32 throughout, whatever the attention precision (AttnDims::compute
// permits rounding, it does not require it).
//
// A device length (AttnShape::tk_dev) is added to Tk by both kernels first; chunks that start
// at or past Tk do nothing and the combine reads only the chunks below Tk, so the launch
// geometry and scratch depend on S, never on Tk.
#pragma once

#include "attention_shape.cuh"

namespace mtk {

// Warp `warp_id()` of the block scores chunk blockIdx.x * warps + warp_id() for the query heads
// of row group blockIdx.y % row_groups of kv head blockIdx.y / row_groups, batch blockIdx.z.
// ROWS query heads at most (registers: ROWS running outputs of NC values per lane); NC values per
// lane cover hd (lane l owns columns l, l + 32, ...).
template <int NC, int ROWS>
__global__ void attn_decode_partial_kernel(float* __restrict__ part, const float* __restrict__ q,
                                           const float* __restrict__ k, const float* __restrict__ v,
                                           AttnShape d, float scale, int64_t keys, int64_t chunks,
                                           int64_t row_groups, int64_t tile_floats) {
    if (!with_device_length(d)) return;
    const int hd = static_cast<int>(d.hd);
    const int lane = static_cast<int>(lane_id());
    const int64_t chunk =
        static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + static_cast<int64_t>(warp_id());
    const int64_t u_begin = chunk * keys;
    if (chunk >= chunks || u_begin >= d.Tk) return;  // whole warp; the kernel has no block barrier
    const int64_t u_end = u_begin + keys < d.Tk ? u_begin + keys : d.Tk;
    const int64_t b = blockIdx.z, per_kv = d.H / d.K;
    const int64_t g = blockIdx.y / row_groups, h0 = g * per_kv + (blockIdx.y % row_groups) * ROWS;
    const int64_t h_end = (g + 1) * per_kv;
    const int rows = static_cast<int>(h_end - h0 < ROWS ? h_end - h0 : ROWS);

    // This warp's shared memory: the key tile [32][hd + 1] (rows padded by one: with hd a
    // multiple of 32, lane j reads row j, column c at bank (j + c) mod 32, no conflict), which
    // then holds the tile's probabilities [ROWS][32] for the value products, and its query rows
    // [rows][hd], pre-scaled (tile_floats: launch.h attn_decode_tile_floats).
    float* ks =
        mt_dynamic_shared<float>() + static_cast<int64_t>(warp_id()) * (tile_floats + ROWS * hd);
    float* qs = ks + tile_floats;
    for (int i = lane; i < rows * hd; i += static_cast<int>(kWarp)) {
        const int r = i / hd, c = i - r * hd;
        qs[i] = q[qrow(d, b, 0, h0 + r) + c] * scale;
    }
    float m[ROWS], l[ROWS], acc[ROWS][NC];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < NC; ++i) acc[r][i] = 0.0f;
    }
    for (int64_t u0 = u_begin; u0 < u_end; u0 += kAttnDecodeTile) {
        const int jn =
            static_cast<int>(u_end - u0 < kAttnDecodeTile ? u_end - u0 : kAttnDecodeTile);
        __syncwarp();  // the previous tile is consumed (and the queries are written)
        for (int i = lane; i < jn * hd; i += static_cast<int>(kWarp)) {
            const int j = i / hd, c = i - j * hd;
            ks[j * (hd + 1) + c] = k[kvrow(d, b, u0 + j, g) + c];
        }
        __syncwarp();
        const bool valid = lane < jn;
        float p[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            p[r] = 0.0f;
            if (r >= rows) continue;  // warp-uniform
            const float sc = valid ? row_dot(qs + r * hd, ks + lane * (hd + 1), hd) : -INFINITY;
            const float m_new = fmaxf(m[r], warp_max(sc));  // finite: lane 0's key is valid
            const float corr = expf(m[r] - m_new);
            p[r] = valid ? expf(sc - m_new) : 0.0f;
            l[r] = l[r] * corr + warp_sum(p[r]);
#pragma unroll
            for (int i = 0; i < NC; ++i) acc[r][i] *= corr;
            m[r] = m_new;
        }
        __syncwarp();  // every lane is done with the keys: the tile's probabilities replace them
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
            if (r < rows) ks[r * kWarp + lane] = p[r];
        __syncwarp();
        for (int j = 0; j < jn; ++j) {
            float vj[NC];
#pragma unroll
            for (int i = 0; i < NC; ++i) {
                const int c = lane + i * static_cast<int>(kWarp);
                vj[i] = c < hd ? v[kvrow(d, b, u0 + j, g) + c] : 0.0f;  // coalesced over lanes
            }
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                if (r >= rows) continue;             // warp-uniform
                const float pj = ks[r * kWarp + j];  // a broadcast read
#pragma unroll
                for (int i = 0; i < NC; ++i) acc[r][i] += pj * vj[i];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        if (r >= rows) continue;
        float* out = part + ((b * d.H + h0 + r) * chunks + chunk) * (d.hd + 2);
        if (lane == 0) {
            out[0] = m[r];
            out[1] = l[r];
        }
#pragma unroll
        for (int i = 0; i < NC; ++i) {
            const int c = lane + i * static_cast<int>(kWarp);
            if (c < hd) out[2 + c] = acc[r][i];
        }
    }
}

// One warp per (batch, head): merges the partials of the chunks below Tk in chunk order.
template <int NC>
__global__ void attn_decode_combine_kernel(float* __restrict__ o, float* __restrict__ lse,
                                           const float* __restrict__ part, AttnShape d,
                                           int64_t keys, int64_t chunks) {
    if (!with_device_length(d)) return;
    const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp_id();
    if (item >= d.B * d.H) return;  // whole warp
    const int hd = static_cast<int>(d.hd);
    const int lane = static_cast<int>(lane_id());
    const int64_t used = (d.Tk + keys - 1) / keys;  // chunk 0 holds key 0: used >= 1
    const float* rowp = part + item * chunks * (d.hd + 2);
    float big = -INFINITY;
    for (int64_t s = 0; s < used; ++s) big = fmaxf(big, rowp[s * (d.hd + 2)]);
    float sum = 0.0f, acc[NC];
#pragma unroll
    for (int i = 0; i < NC; ++i) acc[i] = 0.0f;
    for (int64_t s = 0; s < used; ++s) {
        const float* ps = rowp + s * (d.hd + 2);
        const float w = expf(ps[0] - big);
        sum += ps[1] * w;
#pragma unroll
        for (int i = 0; i < NC; ++i) {
            const int c = lane + i * static_cast<int>(kWarp);
            if (c < hd) acc[i] += ps[2 + c] * w;
        }
    }
    const float inv = 1.0f / sum;
#pragma unroll
    for (int i = 0; i < NC; ++i) {
        const int c = lane + i * static_cast<int>(kWarp);
        if (c < hd) o[item * d.hd + c] = acc[i] * inv;
    }
    if (lane == 0) lse[item] = big + logf(sum);
}

template <int NC>
void attention_decode_nc(Stream s, float* o, float* lse, const float* q, const float* k,
                         const float* v, const AttnShape& d, float scale, float* scratch,
                         int64_t warps_wanted) {
    const AttnDecodePlan p = attn_decode_plan(d.B, d.S, d.H, d.K, d.hd, warps_wanted);
    constexpr int kRows = attn_decode_rows(NC);  // == p.rows
    MT_LAUNCH((attn_decode_partial_kernel<NC, kRows>), p.partial, s, scratch, q, k, v, d, scale,
              p.keys, p.chunks, p.row_groups, p.tile_floats);
    MT_LAUNCH(attn_decode_combine_kernel<NC>, p.combine, s, o, lse, scratch, d, p.keys, p.chunks);
}

// Sizes as moetrain::AttnDims with Tq == 1 < S (attn_decode); hd <= kMaxHeadDim; scratch:
// attn_decode_plan(B, S, H, K, hd, warps_wanted).scratch bytes.
void attention_decode_fwd(Stream s, float* o, float* lse, const float* q, const float* k,
                          const float* v, const AttnShape& d, float scale, float* scratch,
                          int64_t warps_wanted = kAttnDecodeWarpsWanted) {
    if (d.B <= 0 || d.H <= 0 || d.hd <= 0) return;
    dispatch_lane_chunks(d.hd, [&](auto nc) {
        attention_decode_nc<decltype(nc)::value>(s, o, lse, q, k, v, d, scale, scratch,
                                                 warps_wanted);
    });
}

}  // namespace mtk
