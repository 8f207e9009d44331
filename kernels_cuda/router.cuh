// MoE routing (docs/MODEL.md 2-3): the softmax / sigmoid top-k router forward and backward
// (selection by score + expert bias, routed scaling), the aux and z loss terms, and hash
// routing. One warp per token: the lanes stride over the E experts, warp reductions combine
// them; the k selected experts (k <= kMaxTopK) are chosen one at a time by a warp argmax of
// the selection key with ties to the lower index and kept in registers by every lane.
#pragma once

#include "common.cuh"

namespace mtk {

// Warp argmax of (value, index) pairs: larger value wins, ties go to the lower index.
__device__ __forceinline__ void warp_argmax(float& v, int& idx) {
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(kFullMask, v, o);
        int oi = __shfl_xor_sync(kFullMask, idx, o);
        if (ov > v || (ov == v && oi < idx)) {
            v = ov;
            idx = oi;
        }
    }
}

// Router options of one call (moetrain::RouterArgs plus the expert bias, which may be nullptr).
struct RouterOpts {
    bool sigmoid = false;
    bool norm_topk = true;
    float scaling = 1.0f;
    const float* bias = nullptr;
};

// score[n,e] = softmax(l[n])[e] or sigmoid(l[n,e]) (m, inv: the row's max and 1 / sum exp).
__device__ __forceinline__ float router_score(const RouterOpts& o, float l, float m, float inv) {
    return o.sigmoid ? mt_sigmoid(l) : expf(l - m) * inv;
}

__global__ void router_fwd_kernel(float* __restrict__ probs, float* __restrict__ lse,
                                  int32_t* __restrict__ topk_idx, float* __restrict__ topk_w,
                                  const float* __restrict__ logits, int64_t N, int E, int k,
                                  RouterOpts o) {
    const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp_id();
    if (n >= N) return;  // whole warp
    const float* l = logits + n * E;
    float* p = probs + n * E;
    const int lane = static_cast<int>(lane_id());
    float m = -INFINITY;
    for (int e = lane; e < E; e += kWarp) m = fmaxf(m, l[e]);
    m = warp_max(m);
    float s = 0.0f;
    for (int e = lane; e < E; e += kWarp) s += expf(l[e] - m);
    s = warp_sum(s);
    const float inv = 1.0f / s;
    for (int e = lane; e < E; e += kWarp) p[e] = router_score(o, l[e], m, inv);
    if (lane == 0) lse[n] = m + logf(s);

    int chosen[kMaxTopK];
    float chosen_p[kMaxTopK];
    float total = 0.0f;
    for (int j = 0; j < k; ++j) {
        float best = -INFINITY, best_p = 0.0f;
        int best_e = E;
        for (int e = lane; e < E; e += kWarp) {
            bool taken = false;
            for (int i = 0; i < j; ++i) taken = taken || chosen[i] == e;
            const float pe = router_score(o, l[e], m, inv);  // bit-identical to p[e]
            const float q = o.bias ? pe + o.bias[e] : pe;    // the selection key
            if (!taken && (q > best || (q == best && e < best_e))) {
                best = q;
                best_e = e;
                best_p = pe;
            }
        }
        warp_argmax(best, best_e);
        chosen[j] = best_e;
        // The winner's score, from the lane that holds expert best_e (lane best_e % 32).
        chosen_p[j] = __shfl_sync(kFullMask, best_p, best_e % static_cast<int>(kWarp));
        total += chosen_p[j];
    }
    if (lane == 0) {
        for (int j = 0; j < k; ++j) {
            topk_idx[n * k + j] = chosen[j];
            const float w = o.norm_topk ? chosen_p[j] / total : chosen_p[j];
            topk_w[n * k + j] = w * o.scaling;
        }
    }
}

// d loss / d score[n,e] = ds_e: the top-k weight gradient (through the renormalisation and the
// routed scaling a: w_j = a s_j / S, so ds_i += (a dw_i - sum_j dw_j w_j) / S) plus the aux
// term, scale * aux_alpha * E * f_e / N for softmax (f_e = counts[e] / (N k)) and, for sigmoid
// (P_e = mean_n s_e / T, T = sum_j s_j), scale * aux_alpha * E * (f_e / T - sum_j f_j s_j / T^2)
// / N. Then dlogits = p * (ds - sum_e p ds) + zc * p for softmax, s (1 - s) ds + zc *
// softmax(l) for sigmoid, with zc = scale * z_alpha * 2 lse / N (d lse / d l = softmax(l),
// read from the logits when probs holds sigmoid scores).
__global__ void router_bwd_kernel(float* __restrict__ dlogits, const float* __restrict__ dtopk_w,
                                  const float* __restrict__ probs, const float* __restrict__ lse,
                                  const float* __restrict__ logits,
                                  const int32_t* __restrict__ topk_idx,
                                  const float* __restrict__ topk_w,
                                  const int32_t* __restrict__ counts, int64_t N, int E, int k,
                                  RouterOpts o, float aux_alpha, float z_alpha, float scale,
                                  int32_t* err) {
    const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp_id();
    if (n >= N) return;  // whole warp
    const float* p = probs + n * E;
    const int32_t* idx = topk_idx + n * k;
    const float nN = static_cast<float>(N);
    float sel = 0.0f, dot = 0.0f;  // sum of the selected p; sum_j dw_j w_j
    for (int j = 0; j < k; ++j) {
        if (!in_range(idx[j], E)) {  // skipped (it matches no expert below) and reported
            if (lane_id() == 0) report_error(err, kErrRouterExpert, idx[j]);
            continue;
        }
        sel += p[idx[j]];
        dot += dtopk_w[n * k + j] * topk_w[n * k + j];
    }
    const float aux_coef =
        scale * aux_alpha * static_cast<float>(E) / (nN * nN * static_cast<float>(k));
    const int lane = static_cast<int>(lane_id());
    float T = 1.0f, fs = 0.0f;  // sigmoid: sum_e s_e and sum_e counts[e] s_e
    if (o.sigmoid) {
        T = 0.0f;
        for (int e = lane; e < E; e += kWarp) {
            T += p[e];
            fs += static_cast<float>(counts[e]) * p[e];
        }
        T = warp_sum(T);
        fs = warp_sum(fs);
    }
    float pdp = 0.0f;
    for (int e = lane; e < E; e += kWarp) {
        float dp = o.sigmoid ? aux_coef * (static_cast<float>(counts[e]) / T - fs / (T * T))
                             : aux_coef * static_cast<float>(counts[e]);
        for (int j = 0; j < k; ++j)
            if (idx[j] == e) {
                const float dw = dtopk_w[n * k + j];
                dp += o.norm_topk ? (o.scaling * dw - dot) / sel : o.scaling * dw;
            }
        pdp += p[e] * dp;
        dlogits[n * E + e] = dp;  // dp kept in the output until pdp is known
    }
    pdp = warp_sum(pdp);
    const float zc = scale * z_alpha * 2.0f * lse[n] / nN;
    for (int e = lane; e < E; e += kWarp) {
        const float dp = dlogits[n * E + e];  // written by this lane above
        if (o.sigmoid)
            dlogits[n * E + e] = p[e] * (1.0f - p[e]) * dp + zc * expf(logits[n * E + e] - lse[n]);
        else
            dlogits[n * E + e] = p[e] * (dp - pdp) + zc * p[e];
    }
}

// out[0] += aux_alpha * E * sum_{n,e} f_e P[n,e] / N, out[1] += z_alpha * sum_n lse^2 / N, in
// two passes (launch.h aux_partial): block b sums rows [b R, (b + 1) R) into partial[2b] (aux)
// and partial[2b + 1] (z), then router_aux_finish_kernel adds the partials in block order. The
// chunks and every sum's order depend on N only: deterministic. P = p (softmax) or s_e / sum_j
// s_j (sigmoid). Softmax sums each expert's column of the block's rows first and weighs it by
// f_e once: with E <= blockDim.x the block reads whole rows side by side (thread t keeps column
// t % E of every blockDim.x / E-th row: coalesced, no index division in the loop), otherwise a
// thread walks whole columns. Sigmoid gives each warp whole rows (lanes over the experts) for
// the row sums.
__global__ void router_aux_partial_kernel(float* __restrict__ partial,
                                          const float* __restrict__ probs,
                                          const float* __restrict__ lse,
                                          const int32_t* __restrict__ counts, int64_t N, int64_t E,
                                          bool sigmoid, int64_t rows_per_block) {
    const int64_t r0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
    const int64_t r1 = r0 + rows_per_block < N ? r0 + rows_per_block : N;
    float aux = 0.0f, z = 0.0f;
    if (sigmoid) {
        const int64_t warps = blockDim.x / kWarp;
        for (int64_t n = r0 + warp_id(); n < r1; n += warps) {  // whole warps
            const float* p = probs + n * E;
            float T = 0.0f, fs = 0.0f;
            for (int64_t e = lane_id(); e < E; e += kWarp) {
                T += p[e];
                fs += static_cast<float>(counts[e]) * p[e];
            }
            T = warp_sum(T);
            fs = warp_sum(fs);
            if (lane_id() == 0) aux += fs / T;
        }
    } else if (E <= blockDim.x) {
        const int64_t rows_per_pass = blockDim.x / E, e = threadIdx.x % E;
        if (threadIdx.x < rows_per_pass * E) {
            float column = 0.0f;
            for (int64_t n = r0 + threadIdx.x / E; n < r1; n += rows_per_pass)
                column += probs[n * E + e];
            aux = static_cast<float>(counts[e]) * column;
        }
    } else {
        for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
            float column = 0.0f;
            for (int64_t n = r0; n < r1; ++n) column += probs[n * E + e];
            aux += static_cast<float>(counts[e]) * column;
        }
    }
    for (int64_t n = r0 + threadIdx.x; n < r1; n += blockDim.x) z += lse[n] * lse[n];
    aux = block_sum(aux);
    z = block_sum(z);
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = aux;
        partial[2 * blockIdx.x + 1] = z;
    }
}

// One block: the blocks' partial sums in block order (thread t adds blocks t, t + blockDim.x,
// ...; then the fixed-order block sum), scaled into out.
__global__ void router_aux_finish_kernel(float* out, const float* __restrict__ partial,
                                         int64_t blocks, int64_t N, int64_t E, int64_t k,
                                         float aux_alpha, float z_alpha) {
    float aux = 0.0f, z = 0.0f;
    for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) {
        aux += partial[2 * b];
        z += partial[2 * b + 1];
    }
    aux = block_sum(aux);
    z = block_sum(z);
    if (threadIdx.x == 0) {
        const float nN = static_cast<float>(N);
        out[0] += aux_alpha * static_cast<float>(E) * (aux / (nN * static_cast<float>(k))) / nN;
        out[1] += z_alpha * z / nN;
    }
}

__global__ void hash_route_kernel(int32_t* __restrict__ topk_idx, const int32_t* __restrict__ ids,
                                  int64_t N, int layer, int E) {
    for (int64_t n = global_thread(); n < N; n += grid_threads())
        topk_idx[n] = mt_hash_expert(ids[n], layer, E);
}

// k <= kMaxTopK in every router launcher.
void router_fwd(Stream s, float* probs, float* lse, int32_t* topk_idx, float* topk_w,
                const float* logits, int64_t N, int64_t E, int64_t k, const RouterOpts& o) {
    if (N > 0)
        MT_LAUNCH(router_fwd_kernel, warp_per_item(N), s, probs, lse, topk_idx, topk_w, logits, N,
                  static_cast<int>(E), static_cast<int>(k), o);
}

// logits: the forward's input (read for the z-loss term when o.sigmoid); o.bias is not read.
void router_bwd(Stream s, float* dlogits, const float* dtopk_w, const float* probs,
                const float* lse, const float* logits, const int32_t* topk_idx, const float* topk_w,
                const int32_t* counts, int64_t N, int64_t E, int64_t k, const RouterOpts& o,
                float aux_alpha, float z_alpha, float scale, int32_t* err) {
    if (N > 0)
        MT_LAUNCH(router_bwd_kernel, warp_per_item(N), s, dlogits, dtopk_w, probs, lse, logits,
                  topk_idx, topk_w, counts, N, static_cast<int>(E), static_cast<int>(k), o,
                  aux_alpha, z_alpha, scale, err);
}

// scratch: aux_scratch_bytes(N).
void router_aux_loss(Stream s, float* out, const float* probs, const float* lse,
                     const int32_t* counts, int64_t N, int64_t E, int64_t k, bool sigmoid,
                     float aux_alpha, float z_alpha, float* scratch) {
    if (N <= 0) return;
    MT_LAUNCH(router_aux_partial_kernel, aux_partial(N), s, scratch, probs, lse, counts, N, E,
              sigmoid, aux_rows_per_block(N));
    MT_LAUNCH(router_aux_finish_kernel, one_block(), s, out, scratch, aux_blocks(N), N, E, k,
              aux_alpha, z_alpha);
}

void hash_route(Stream s, int32_t* topk_idx, const int32_t* ids, int64_t N, int64_t layer,
                int64_t E) {
    if (N > 0)
        MT_LAUNCH(hash_route_kernel, elementwise(N), s, topk_idx, ids, N, static_cast<int>(layer),
                  static_cast<int>(E));
}

}  // namespace mtk
