/* Causal attention, flash-style: online softmax over key blocks, only the log-sum-exp per query
 * row is saved, no Tq x Tk matrix exists. q/o [B,Tq,H,hd]; k/v [B,S,K,hd] (S = capacity,
 * Tk <= S valid rows); lse [B,H,Tq]. Query t sits at absolute position t + (Tk - Tq) and sees
 * keys u <= that position; query head h reads kv head h / (H/K) (MHA, GQA, MQA alike).
 * One work-item per query row (forward, dq) or per key row (dk/dv), so every sum is
 * accumulated in a fixed order without atomics. The kernels that see Tk add the device length
 * tk[0] when has_tk (AttnDims::tk_dev); a Tk outside [Tq, S] is reported (code 12) and the
 * kernels write nothing. */

#define MT_ATTN_MAX_HD 256
#define MT_ATTN_BLOCK 16

inline float mt_dot_gp(__global const float* a, const float* b, int hd) {
    float s = 0.0f;
    for (int d = 0; d < hd; ++d) s += a[d] * b[d];
    return s;
}

inline void mt_load_row(float* dst, __global const float* src, int hd) {
    for (int d = 0; d < hd; ++d) dst[d] = src[d];
}

/* Tk plus the device length for a work-item of a range of `items`; -1 when the item is past the
 * range or the length leaves [Tq, S] (reported once, by work-item 0). */
inline long mt_attn_item_tk(long items, long Tk, long Tq, long S, __global const int* tk,
                            long tk_off, int has_tk, __global int* err, long err_off) {
    if ((long)get_global_id(0) >= items) return -1;
    long extra = mt_dev_value(tk, tk_off, has_tk), r = Tk + extra;
    if (r >= Tq && r <= S) return r;
    if (get_global_id(0) == 0) mt_report(err + err_off, 12, (int)extra);
    return -1;
}

/* Query row id = (b * H + h) * Tq + t -> t, h, b, the last visible key and the q/o row. */
typedef struct {
    long id, t, h, b, last, row;
} mt_query;
inline mt_query mt_query_of(long id, long Tq, long Tk, long H, int hd) {
    mt_query r;
    r.id = id;
    r.t = id % Tq;
    long bh = id / Tq;
    r.h = bh % H;
    r.b = bh / H;
    r.last = r.t + (Tk - Tq);
    r.row = ((r.b * Tq + r.t) * H + r.h) * hd;
    return r;
}

/* Offset in k / v of key row 0 of query row Q's kv head (k/v [B,S,K,hd], head h reads h/(H/K)). */
inline long mt_kv_base(mt_query Q, long S, long H, long K, int hd) {
    return (Q.b * S * K + Q.h / (H / K)) * hd;
}

__kernel void mt_attention_fwd(__global float* o, long o_off, __global float* lse, long lse_off,
                               __global const float* q, long q_off, __global const float* k,
                               long k_off, __global const float* v, long v_off, long B, long Tq,
                               long Tk, long S, long H, long K, int hd, float scale,
                               __global const int* tk, long tk_off, int has_tk, __global int* err,
                               long err_off) {
    Tk = mt_attn_item_tk(B * H * Tq, Tk, Tq, S, tk, tk_off, has_tk, err, err_off);
    if (Tk < 0) return;
    mt_query Q = mt_query_of(get_global_id(0), Tq, Tk, H, hd);
    long last = Q.last, qrow = Q.row;
    float qv[MT_ATTN_MAX_HD], acc[MT_ATTN_MAX_HD], s[MT_ATTN_BLOCK];
    mt_load_row(qv, q + q_off + qrow, hd);
    for (int d = 0; d < hd; ++d) acc[d] = 0.0f;
    __global const float* kb = k + k_off + mt_kv_base(Q, S, H, K, hd);
    __global const float* vb = v + v_off + mt_kv_base(Q, S, H, K, hd);
    float m = -INFINITY, l = 0.0f;
    for (long u0 = 0; u0 <= last; u0 += MT_ATTN_BLOCK) {
        int nb = (int)min((long)MT_ATTN_BLOCK, last + 1 - u0);
        float bm = -INFINITY;
        for (int j = 0; j < nb; ++j) {
            s[j] = mt_dot_gp(kb + (u0 + j) * K * hd, qv, hd) * scale;
            bm = fmax(bm, s[j]);
        }
        float mnew = fmax(m, bm);
        float corr = mt_expf(m - mnew);
        l *= corr;
        for (int d = 0; d < hd; ++d) acc[d] *= corr;
        for (int j = 0; j < nb; ++j) {
            float p = mt_expf(s[j] - mnew);
            l += p;
            __global const float* vr = vb + (u0 + j) * K * hd;
            for (int d = 0; d < hd; ++d) acc[d] += p * vr[d];
        }
        m = mnew;
    }
    float inv = 1.0f / l;
    for (int d = 0; d < hd; ++d) o[o_off + qrow + d] = acc[d] * inv;
    lse[lse_off + Q.id] = m + mt_logf(l);
}

/* delta[b,h,t] = dout . o for every query row (the softmax backward's row term). */
__kernel void mt_attention_bwd_delta(__global float* delta, long delta_off,
                                     __global const float* dout, long dout_off,
                                     __global const float* o, long o_off, long B, long Tq, long H,
                                     int hd) {
    long id = get_global_id(0);
    if (id >= B * H * Tq) return;
    long row = mt_query_of(id, Tq, Tq, H, hd).row;
    float s = 0.0f;
    for (int d = 0; d < hd; ++d) s += dout[dout_off + row + d] * o[o_off + row + d];
    delta[delta_off + id] = s;
}

/* dq[t] = scale * sum_u p(t,u) (dout[t].v[u] - delta[t]) k[u]; one work-item per query row. */
__kernel void mt_attention_bwd_dq(__global float* dq, long dq_off, __global const float* dout,
                                  long dout_off, __global const float* q, long q_off,
                                  __global const float* k, long k_off, __global const float* v,
                                  long v_off, __global const float* lse, long lse_off,
                                  __global const float* delta, long delta_off, long B, long Tq,
                                  long Tk, long S, long H, long K, int hd, float scale,
                                  __global const int* tk, long tk_off, int has_tk,
                                  __global int* err, long err_off) {
    Tk = mt_attn_item_tk(B * H * Tq, Tk, Tq, S, tk, tk_off, has_tk, err, err_off);
    if (Tk < 0) return;
    mt_query Q = mt_query_of(get_global_id(0), Tq, Tk, H, hd);
    long row = Q.row;
    float L = lse[lse_off + Q.id], D = delta[delta_off + Q.id];
    float qv[MT_ATTN_MAX_HD], dov[MT_ATTN_MAX_HD], acc[MT_ATTN_MAX_HD];
    mt_load_row(qv, q + q_off + row, hd);
    mt_load_row(dov, dout + dout_off + row, hd);
    for (int d = 0; d < hd; ++d) acc[d] = 0.0f;
    __global const float* kb = k + k_off + mt_kv_base(Q, S, H, K, hd);
    __global const float* vb = v + v_off + mt_kv_base(Q, S, H, K, hd);
    for (long u = 0; u <= Q.last; ++u) {
        __global const float* kr = kb + u * K * hd;
        float p = mt_expf(mt_dot_gp(kr, qv, hd) * scale - L);
        float ds = p * (mt_dot_gp(vb + u * K * hd, dov, hd) - D);
        for (int d = 0; d < hd; ++d) acc[d] += ds * kr[d];
    }
    for (int d = 0; d < hd; ++d) dq[dq_off + row + d] = acc[d] * scale;
}

/* dk[u], dv[u] for one key row, summed over the query heads sharing its kv head and over the
 * queries that see it; rows u >= Tk (unused cache capacity) are zeroed. */
__kernel void mt_attention_bwd_dkdv(__global float* dk, long dk_off, __global float* dv,
                                    long dv_off, __global const float* dout, long dout_off,
                                    __global const float* q, long q_off, __global const float* k,
                                    long k_off, __global const float* v, long v_off,
                                    __global const float* lse, long lse_off,
                                    __global const float* delta, long delta_off, long B, long Tq,
                                    long Tk, long S, long H, long K, int hd, float scale,
                                    __global const int* tk, long tk_off, int has_tk,
                                    __global int* err, long err_off) {
    long id = get_global_id(0);
    Tk = mt_attn_item_tk(B * K * S, Tk, Tq, S, tk, tk_off, has_tk, err, err_off);
    if (Tk < 0) return;
    long u = id % S, bk = id / S, kvh = bk % K, b = bk / K;
    long row = ((b * S + u) * K + kvh) * hd;
    if (u >= Tk) {
        for (int d = 0; d < hd; ++d) dk[dk_off + row + d] = 0.0f;
        for (int d = 0; d < hd; ++d) dv[dv_off + row + d] = 0.0f;
        return;
    }
    float kv[MT_ATTN_MAX_HD], vv[MT_ATTN_MAX_HD], ak[MT_ATTN_MAX_HD], av[MT_ATTN_MAX_HD];
    mt_load_row(kv, k + k_off + row, hd);
    mt_load_row(vv, v + v_off + row, hd);
    for (int d = 0; d < hd; ++d) ak[d] = av[d] = 0.0f;
    long G = H / K, off = Tk - Tq;
    long t0 = u - off > 0 ? u - off : 0;
    for (long j = 0; j < G; ++j) {
        long h = kvh * G + j;
        for (long t = t0; t < Tq; ++t) {
            long qrow = ((b * Tq + t) * H + h) * hd;
            long srow = (b * H + h) * Tq + t;
            __global const float* qr = q + q_off + qrow;
            __global const float* dor = dout + dout_off + qrow;
            float p = mt_expf(mt_dot_gp(qr, kv, hd) * scale - lse[lse_off + srow]);
            float ds = p * (mt_dot_gp(dor, vv, hd) - delta[delta_off + srow]);
            for (int d = 0; d < hd; ++d) {
                av[d] += p * dor[d];
                ak[d] += ds * qr[d];
            }
        }
    }
    for (int d = 0; d < hd; ++d) {
        dk[dk_off + row + d] = ak[d] * scale;
        dv[dv_off + row + d] = av[d];
    }
}
