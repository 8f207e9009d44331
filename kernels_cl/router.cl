/* MoE routing (MODEL.md 2-3): softmax / sigmoid top-k router forward/backward (selection by
 * score + expert bias, routed scaling), the auxiliary load-balancing and z losses, and hash
 * routing. Expert counts are i32. */

/* One work-item per token: probs = softmax(logits) (sigmoid(logits) when sigmoid), lse, and
 * the k experts of the largest keys q = probs + bias (has_bias; ties: lower expert first) in
 * descending q; weights = probs renormalised when norm_topk, then times scaling. */
__kernel void mt_router_fwd(__global float* probs, long probs_off, __global float* lse,
                            long lse_off, __global int* topk_idx, long idx_off,
                            __global float* topk_w, long w_off, __global const float* logits,
                            long logits_off, __global const float* bias, long bias_off,
                            int has_bias, long N, int E, int k, int norm_topk, int sigmoid,
                            float scaling) {
    long n = get_global_id(0);
    if (n >= N) return;
    __global const float* lr = logits + logits_off + n * E;
    __global float* pr = probs + probs_off + n * E;
    float m = -INFINITY;
    for (int e = 0; e < E; ++e) m = fmax(m, lr[e]);
    float s = 0.0f;
    for (int e = 0; e < E; ++e) s += mt_expf(lr[e] - m);
    for (int e = 0; e < E; ++e) pr[e] = sigmoid ? mt_sigmoid(lr[e]) : mt_expf(lr[e] - m) / s;
    lse[lse_off + n] = m + mt_logf(s);
    /* Selection in the total order (q descending, index ascending): each pass takes the best
     * element strictly after the previous pick. */
    float prev_q = INFINITY, total = 0.0f;
    int prev_e = -1;
    for (int j = 0; j < k; ++j) {
        int best = -1;
        float bq = 0.0f;
        for (int e = 0; e < E; ++e) {
            float q = has_bias ? pr[e] + bias[bias_off + e] : pr[e];
            int after = q < prev_q || (q == prev_q && e > prev_e);
            if (after && (best < 0 || q > bq)) {
                best = e;
                bq = q;
            }
        }
        float p = pr[best];
        topk_idx[idx_off + n * k + j] = best;
        topk_w[w_off + n * k + j] = p;
        total += p;
        prev_q = bq;
        prev_e = best;
    }
    for (int j = 0; j < k; ++j) {
        float w = topk_w[w_off + n * k + j];
        topk_w[w_off + n * k + j] = (norm_topk ? w / total : w) * scaling;
    }
}

/* d loss / d score_e (g) from the top-k weights (through the renormalisation when norm_topk,
 * and the scaling a) plus the aux-loss term: softmax f_e c, sigmoid c (f_e / S - fs / S^2)
 * with S = sum_e s_e and fs = sum_e f_e s_e. */
float mt_router_g(int e, __global const float* pr, __global const int* idx,
                  __global const float* dtw, __global const int* counts, long counts_off, int k,
                  int norm_topk, float a, float total, float wdot, float aux_coef, float fnorm,
                  int sigmoid, float S, float fs) {
    float g = 0.0f;
    if (aux_coef != 0.0f) {
        float f = (float)counts[counts_off + e] * fnorm;
        g = sigmoid ? aux_coef * (f / S - fs / (S * S)) : aux_coef * f;
    }
    for (int j = 0; j < k; ++j)
        if (idx[j] == e) g += norm_topk ? (a * dtw[j] - wdot) / total : a * dtw[j];
    return g;
}

/* dlogits: the softmax (or sigmoid: s (1 - s)) backward of g, plus the z-loss gradient
 * 2 z_alpha lse softmax(logits) / N. */
__kernel void mt_router_bwd(__global float* dlogits, long dl_off, __global const float* dtopk_w,
                            long dw_off, __global const float* probs, long probs_off,
                            __global const float* lse, long lse_off, __global const float* logits,
                            long logits_off, __global const int* topk_idx, long idx_off,
                            __global const float* topk_w, long w_off, __global const int* counts,
                            long counts_off, long N, int E, int k, int norm_topk, int sigmoid,
                            float a, float aux_alpha, float z_alpha, float scale, __global int* err,
                            long err_off) {
    long n = get_global_id(0);
    if (n >= N) return;
    __global const float* pr = probs + probs_off + n * E;
    __global const float* lr = logits + logits_off + n * E;
    __global const int* idx = topk_idx + idx_off + n * k;
    for (int j = 0; j < k; ++j) {
        if (idx[j] < 0 || idx[j] >= E) { /* reported, never dereferenced */
            mt_report(err + err_off, 3, idx[j]);
            for (int e = 0; e < E; ++e) dlogits[dl_off + n * E + e] = NAN;
            return;
        }
    }
    __global const float* dtw = dtopk_w + dw_off + n * k;
    __global const float* tw = topk_w + w_off + n * k;
    float total = 0.0f, wdot = 0.0f;
    for (int j = 0; j < k; ++j) {
        total += pr[idx[j]];
        wdot += dtw[j] * tw[j];
    }
    float aux_coef = aux_alpha != 0.0f ? scale * aux_alpha * (float)E / (float)N : 0.0f;
    float fnorm = 1.0f / ((float)N * (float)k);
    float S = 0.0f, fs = 0.0f;
    if (sigmoid && aux_coef != 0.0f) {
        for (int e = 0; e < E; ++e) {
            S += pr[e];
            fs += (float)counts[counts_off + e] * fnorm * pr[e];
        }
    }
    float l = lse[lse_off + n];
    float zc = scale * z_alpha * 2.0f * l / (float)N;
    if (sigmoid) {
        for (int e = 0; e < E; ++e) {
            float g = mt_router_g(e, pr, idx, dtw, counts, counts_off, k, norm_topk, a, total, wdot,
                                  aux_coef, fnorm, sigmoid, S, fs);
            float sm = zc != 0.0f ? mt_expf(lr[e] - l) : 0.0f;
            dlogits[dl_off + n * E + e] = pr[e] * (1.0f - pr[e]) * g + zc * sm;
        }
        return;
    }
    /* g_e computed twice (for the dot and the output) to stay in registers. */
    float dot = 0.0f;
    for (int e = 0; e < E; ++e)
        dot += pr[e] * mt_router_g(e, pr, idx, dtw, counts, counts_off, k, norm_topk, a, total,
                                   wdot, aux_coef, fnorm, 0, 1.0f, 0.0f);
    for (int e = 0; e < E; ++e) {
        float g = mt_router_g(e, pr, idx, dtw, counts, counts_off, k, norm_topk, a, total, wdot,
                              aux_coef, fnorm, 0, 1.0f, 0.0f);
        dlogits[dl_off + n * E + e] = pr[e] * (g - dot) + zc * pr[e];
    }
}

/* out[0] += aux_alpha * E * sum_e f_e * P_e, f_e = counts[e] / (N k), P_e = mean_n p[n,e]
 * (sigmoid: mean_n s[n,e] / sum_j s[n,j]); out[1] += z_alpha * mean_n lse[n]^2. One
 * work-group. */
__kernel void mt_router_aux_loss(__global float* out, long out_off, __global const float* probs,
                                 long probs_off, __global const float* lse, long lse_off,
                                 __global const int* counts, long counts_off, long N, int E, int k,
                                 int sigmoid, float aux_alpha, float z_alpha) {
    __local float scratch[MT_WG_MAX];
    int lid = (int)get_local_id(0), lsz = (int)get_local_size(0);
    float zs = 0.0f;
    for (long n = lid; n < N; n += lsz) zs += lse[lse_off + n] * lse[lse_off + n];
    zs = mt_wg_sum(zs, scratch);
    float as = 0.0f;
    for (int e = lid; e < E; e += lsz) {
        float pe = 0.0f;
        for (long n = 0; n < N; ++n) {
            __global const float* pr = probs + probs_off + n * E;
            float rs = 1.0f;
            if (sigmoid) {
                rs = 0.0f;
                for (int j = 0; j < E; ++j) rs += pr[j];
            }
            pe += pr[e] / rs;
        }
        float f = (float)counts[counts_off + e] / ((float)N * (float)k);
        as += f * (pe / (float)N);
    }
    as = mt_wg_sum(as, scratch);
    if (lid == 0) {
        out[out_off] += aux_alpha * (float)E * as;
        out[out_off + 1] += z_alpha * (zs / (float)N);
    }
}

/* topk_idx[n] = mix32(ids[n] + 0x9E3779B9 * (layer + 1)) mod E */
__kernel void mt_hash_route(__global int* topk_idx, long idx_off, __global const int* ids,
                            long ids_off, long N, int layer, int E) {
    long n = get_global_id(0);
    if (n >= N) return;
    topk_idx[idx_off + n] = mt_hash_expert(ids[ids_off + n], layer, E);
}
