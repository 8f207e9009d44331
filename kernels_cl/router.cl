/* MoE routing (MODEL.md 2-3): softmax top-k router forward/backward, the auxiliary
 * load-balancing and z losses, and hash routing. Expert counts are i32. */

/* One work-item per token: probs = softmax(logits), lse, and the k largest probabilities in
 * descending order (ties: lower expert first), renormalised when norm_topk. */
__kernel void mt_router_fwd(__global float* probs, long probs_off, __global float* lse,
                            long lse_off, __global int* topk_idx, long idx_off,
                            __global float* topk_w, long w_off, __global const float* logits,
                            long logits_off, long N, int E, int k, int norm_topk) {
    long n = get_global_id(0);
    if (n >= N) return;
    __global const float* lr = logits + logits_off + n * E;
    __global float* pr = probs + probs_off + n * E;
    float m = -INFINITY;
    for (int e = 0; e < E; ++e) m = fmax(m, lr[e]);
    float s = 0.0f;
    for (int e = 0; e < E; ++e) s += mt_expf(lr[e] - m);
    for (int e = 0; e < E; ++e) pr[e] = mt_expf(lr[e] - m) / s;
    lse[lse_off + n] = m + mt_logf(s);
    /* Selection in the total order (p descending, index ascending): each pass takes the best
     * element strictly after the previous pick. */
    float prev_p = INFINITY, total = 0.0f;
    int prev_e = -1;
    for (int j = 0; j < k; ++j) {
        int best = -1;
        float bp = 0.0f;
        for (int e = 0; e < E; ++e) {
            float p = pr[e];
            int after = p < prev_p || (p == prev_p && e > prev_e);
            if (after && (best < 0 || p > bp)) {
                best = e;
                bp = p;
            }
        }
        topk_idx[idx_off + n * k + j] = best;
        topk_w[w_off + n * k + j] = bp;
        total += bp;
        prev_p = bp;
        prev_e = best;
    }
    if (norm_topk)
        for (int j = 0; j < k; ++j) topk_w[w_off + n * k + j] /= total;
}

/* dlogits = softmax backward of g, g_e = dL/dp_e from the top-k weights (through the
 * renormalisation when norm_topk) plus the aux-loss term, plus the z-loss gradient. */
__kernel void mt_router_bwd(__global float* dlogits, long dl_off, __global const float* dtopk_w,
                            long dw_off, __global const float* probs, long probs_off,
                            __global const float* lse, long lse_off, __global const int* topk_idx,
                            long idx_off, __global const float* topk_w, long w_off,
                            __global const int* counts, long counts_off, long N, int E, int k,
                            int norm_topk, float aux_alpha, float z_alpha, float scale,
                            __global int* err, long err_off) {
    long n = get_global_id(0);
    if (n >= N) return;
    __global const float* pr = probs + probs_off + n * E;
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
    /* g_e computed twice (for the dot and the output) to stay in registers. */
    float dot = 0.0f;
    for (int e = 0; e < E; ++e) {
        float g = aux_coef != 0.0f ? aux_coef * ((float)counts[counts_off + e] * fnorm) : 0.0f;
        for (int j = 0; j < k; ++j)
            if (idx[j] == e) g += norm_topk ? (dtw[j] - wdot) / total : dtw[j];
        dot += pr[e] * g;
    }
    float zc = scale * z_alpha * 2.0f * lse[lse_off + n] / (float)N;
    for (int e = 0; e < E; ++e) {
        float g = aux_coef != 0.0f ? aux_coef * ((float)counts[counts_off + e] * fnorm) : 0.0f;
        for (int j = 0; j < k; ++j)
            if (idx[j] == e) g += norm_topk ? (dtw[j] - wdot) / total : dtw[j];
        dlogits[dl_off + n * E + e] = pr[e] * (g - dot) + zc * pr[e];
    }
}

/* out[0] += aux_alpha * E * sum_e f_e * mean_n p[n,e], f_e = counts[e] / (N k);
 * out[1] += z_alpha * mean_n lse[n]^2. One work-group. */
__kernel void mt_router_aux_loss(__global float* out, long out_off, __global const float* probs,
                                 long probs_off, __global const float* lse, long lse_off,
                                 __global const int* counts, long counts_off, long N, int E, int k,
                                 float aux_alpha, float z_alpha) {
    __local float scratch[MT_WG_MAX];
    int lid = (int)get_local_id(0), lsz = (int)get_local_size(0);
    float zs = 0.0f;
    for (long n = lid; n < N; n += lsz) zs += lse[lse_off + n] * lse[lse_off + n];
    zs = mt_wg_sum(zs, scratch);
    float as = 0.0f;
    for (int e = lid; e < E; e += lsz) {
        float pe = 0.0f;
        for (long n = 0; n < N; ++n) pe += probs[probs_off + n * E + e];
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
