/* Token sampling (MODEL.md 7), one work-group per row of logits.
 * Greedy: argmax, ties to the lower id. Otherwise p = softmax(logits / temperature), the row
 * is sorted by (p descending, id ascending) with a work-group bitonic sort in global scratch,
 * then top-k / top-p cut the sorted prefix, the kept mass is renormalised and the Philox
 * uniform u (counter = (step, row)) walks the kept ids in sorted order. */

/* a (pa, ia) comes before b in the sampling order. */
inline int mt_before(float pa, int ia, float pb, int ib) {
    return pa > pb || (pa == pb && ia < ib);
}

__kernel void mt_sample_greedy(__global int* out, long out_off, __global const float* logits,
                               long logits_off, long V) {
    __local float sv[MT_WG_MAX];
    __local int si[MT_WG_MAX];
    long b = get_group_id(0);
    int lid = (int)get_local_id(0), lsz = (int)get_local_size(0);
    __global const float* lr = logits + logits_off + b * V;
    float bv = -INFINITY;
    int bi = -1;
    for (long c = lid; c < V; c += lsz) {
        float v = lr[c];
        if (bi < 0 || v > bv) {
            bv = v;
            bi = (int)c;
        }
    }
    sv[lid] = bv;
    si[lid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz / 2; s > 0; s >>= 1) {
        if (lid < s) {
            float ov = sv[lid + s];
            int oi = si[lid + s];
            if (oi >= 0 && (si[lid] < 0 || ov > sv[lid] || (ov == sv[lid] && oi < si[lid]))) {
                sv[lid] = ov;
                si[lid] = oi;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) out[out_off + b] = si[0];
}

/* keys/ids: per-row scratch of P2 (power of two >= V) entries. */
__kernel void mt_sample_topp(__global int* out, long out_off, __global const float* logits,
                             long logits_off, __global float* keys, long keys_off,
                             __global int* ids, long ids_off, long V, long P2, float temperature,
                             long top_k, float top_p, ulong seed, ulong step,
                             __global const int* sd, long sd_off, int has_sd) {
    __local float scratch[MT_WG_MAX];
    long b = get_group_id(0);
    int lid = (int)get_local_id(0), lsz = (int)get_local_size(0);
    __global const float* lr = logits + logits_off + b * V;
    __global float* kr = keys + keys_off + b * P2;
    __global int* ir = ids + ids_off + b * P2;

    /* softmax(logits / temperature) */
    float m, s;
    mt_wg_softmax_stats(lr, V, temperature, scratch, &m, &s);
    for (long c = lid; c < P2; c += lsz) {
        kr[c] = c < V ? mt_expf(lr[c] / temperature - m) / s : -1.0f;
        ir[c] = c < V ? (int)c : INT_MAX;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);

    /* bitonic sort into the order mt_before */
    for (long size = 2; size <= P2; size <<= 1) {
        for (long stride = size / 2; stride > 0; stride >>= 1) {
            for (long i = lid; i < P2 / 2; i += lsz) {
                long lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
                float plo = kr[lo], phi = kr[hi];
                int ilo = ir[lo], ihi = ir[hi];
                int ascending = (lo & size) == 0;
                int swap =
                    ascending ? mt_before(phi, ihi, plo, ilo) : mt_before(plo, ilo, phi, ihi);
                if (swap) {
                    kr[lo] = phi;
                    kr[hi] = plo;
                    ir[lo] = ihi;
                    ir[hi] = ilo;
                }
            }
            barrier(CLK_GLOBAL_MEM_FENCE);
        }
    }

    /* cut, renormalise, walk: sequential so the sums run in sorted order */
    if (lid != 0) return;
    long kept = (top_k > 0 && top_k < V) ? top_k : V;
    if (top_p < 1.0f) {
        float cum = 0.0f;
        for (long i = 0; i < kept; ++i) {
            cum += kr[i];
            if (cum >= top_p) {
                kept = i + 1;
                break;
            }
        }
    }
    float total = 0.0f;
    for (long i = 0; i < kept; ++i) total += kr[i];
    step += (ulong)(uint)mt_dev_value(sd, sd_off, has_sd); /* SampleArgs::step_dev */
    float u = mt_philox_uniform(seed, step, (ulong)b);
    int pick = ir[kept - 1]; /* when rounding leaves u beyond the last cumulative value */
    float cum = 0.0f;
    for (long i = 0; i < kept; ++i) {
        cum += kr[i] / total;
        if (cum > u) {
            pick = ir[i];
            break;
        }
    }
    out[out_off + b] = pick;
}
