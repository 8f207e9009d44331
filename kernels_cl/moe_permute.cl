/* Token permutation for the MoE layer: a stable counting sort of the N*k (token, slot) pairs
 * by expert (count per chunk, prefix offsets, scatter), row gathers and the weighted combine
 * with its backward. Every output element is written by exactly one work-item. Indices outside
 * their range are reported (codes 2, 6, 7, 8) and never dereferenced. A selection dropped by
 * capacity (expert -1) has no row: not counted, slot_row -1, skipped by the combines. */

/* hist[ch, e] = number of slots s in chunk ch with topk_idx[s] == e; 2-D range (e, ch). */
__kernel void mt_moe_count(__global int* hist, long hist_off, __global const int* topk_idx,
                           long idx_off, long slots, long chunk, int E, __global int* err,
                           long err_off) {
    long e = get_global_id(0), ch = get_global_id(1);
    if (e >= E) return;
    long s0 = ch * chunk, s1 = min(slots, s0 + chunk);
    int c = 0;
    for (long s = s0; s < s1; ++s) {
        int x = topk_idx[idx_off + s];
        c += x == e;
        if (e == 0 && (x < -1 || x >= E)) mt_report(err + err_off, 2, x);
    }
    hist[hist_off + ch * E + e] = c;
}

/* counts[e] = sum over chunks; hist[ch, e] becomes the first sorted row of (ch, e); rows
 * r in [sum counts, tail_rows) get row_token 0 (no expert owns them; tail_rows 0 = none). One
 * work-group; base is __local int[E + 1]. */
__kernel void mt_moe_offsets(__global int* counts, long counts_off, __global int* hist,
                             long hist_off, long chunks, int E, __global int* row_token,
                             long rt_off, long tail_rows, __local int* base) {
    int lid = (int)get_local_id(0), lsz = (int)get_local_size(0);
    for (int e = lid; e < E; e += lsz) {
        int c = 0;
        for (long ch = 0; ch < chunks; ++ch) c += hist[hist_off + ch * E + e];
        counts[counts_off + e] = c;
        base[e] = c;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        int run = 0;
        for (int e = 0; e < E; ++e) {
            int c = base[e];
            base[e] = run;
            run += c;
        }
        base[E] = run;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long r = base[E] + lid; r < tail_rows; r += lsz) row_token[rt_off + r] = 0;
    for (int e = lid; e < E; e += lsz) {
        int run = base[e];
        for (long ch = 0; ch < chunks; ++ch) {
            int c = hist[hist_off + ch * E + e];
            hist[hist_off + ch * E + e] = run;
            run += c;
        }
    }
}

/* row_token[row] = token of the slot, slot_row[slot] = row, in slot order within (ch, e). */
__kernel void mt_moe_scatter(__global int* row_token, long rt_off, __global int* slot_row,
                             long sr_off, __global const int* hist, long hist_off,
                             __global const int* topk_idx, long idx_off, long slots, long chunk,
                             int E, int k) {
    long e = get_global_id(0), ch = get_global_id(1);
    if (e >= E) return;
    long s0 = ch * chunk, s1 = min(slots, s0 + chunk);
    int row = hist[hist_off + ch * E + e];
    for (long s = s0; s < s1; ++s) {
        int x = topk_idx[idx_off + s];
        if (e == 0 && x == -1) slot_row[sr_off + s] = -1;
        if (x != e) continue;
        row_token[rt_off + row] = (int)(s / k);
        slot_row[sr_off + s] = row;
        ++row;
    }
}

/* dst[r, c] = src[index[r], c]; 2-D range (c, r). An index outside src (src_rows) yields NaN. */
__kernel void mt_gather_rows(__global float* dst, long dst_off, __global const float* src,
                             long src_off, __global const int* index, long index_off, long R,
                             long dim, long src_rows, __global int* err, long err_off) {
    long c = get_global_id(0), r = get_global_id(1);
    if (c >= dim || r >= R) return;
    int i = index[index_off + r];
    int ok = i >= 0 && i < src_rows;
    if (!ok && c == 0) mt_report(err + err_off, 6, i);
    dst[dst_off + r * dim + c] = ok ? src[src_off + (long)i * dim + c] : NAN;
}

/* y[n, c] (+)= sum_j w[n, j] * rows[slot_row[n*k+j], c] (has_w = 0: weights 1); (c, n). */
__kernel void mt_moe_combine(__global float* y, long y_off, __global const float* rows,
                             long rows_off, __global const int* slot_row, long sr_off,
                             __global const float* w, long w_off, int has_w, long N, int k,
                             long dim, int accumulate, __global int* err, long err_off) {
    long c = get_global_id(0), n = get_global_id(1);
    if (c >= dim || n >= N) return;
    float s = 0.0f;
    for (int j = 0; j < k; ++j) {
        long slot = n * k + j;
        int row = slot_row[sr_off + slot];
        if (row == -1) continue; /* dropped selection */
        if (row < 0 || row >= N * k) {
            if (c == 0) mt_report(err + err_off, 7, row);
            s = NAN;
            continue;
        }
        float v = rows[rows_off + (long)row * dim + c];
        s += has_w ? w[w_off + slot] * v : v;
    }
    __global float* o = y + y_off + n * dim + c;
    *o = accumulate ? *o + s : s;
}

/* drows[slot_row[slot], c] = w[slot] * dy[slot / k, c]; 2-D range (c, slot). */
__kernel void mt_moe_combine_bwd_rows(__global float* drows, long drows_off,
                                      __global const float* dy, long dy_off,
                                      __global const int* slot_row, long sr_off,
                                      __global const float* w, long w_off, int has_w, long slots,
                                      int k, long dim, __global int* err, long err_off) {
    long c = get_global_id(0), slot = get_global_id(1);
    if (c >= dim || slot >= slots) return;
    int row = slot_row[sr_off + slot];
    if (row == -1) return; /* dropped selection: no row */
    if (row < 0 || row >= slots) {
        if (c == 0) mt_report(err + err_off, 8, row);
        return;
    }
    float d = dy[dy_off + (slot / k) * dim + c];
    drows[drows_off + (long)row * dim + c] = has_w ? w[w_off + slot] * d : d;
}

/* dw[slot] = dy[slot / k] . rows[slot_row[slot]] */
__kernel void mt_moe_combine_bwd_w(__global float* dw, long dw_off, __global const float* dy,
                                   long dy_off, __global const float* rows, long rows_off,
                                   __global const int* slot_row, long sr_off, long slots, int k,
                                   long dim) {
    long slot = get_global_id(0);
    if (slot >= slots) return;
    int row = slot_row[sr_off + slot];
    if (row == -1) { /* dropped selection: no weight gradient */
        dw[dw_off + slot] = 0.0f;
        return;
    }
    if (row < 0 || row >= slots) { /* reported by mt_moe_combine_bwd_rows */
        dw[dw_off + slot] = NAN;
        return;
    }
    __global const float* d = dy + dy_off + (slot / k) * dim;
    __global const float* r = rows + rows_off + (long)row * dim;
    float s = 0.0f;
    for (long c = 0; c < dim; ++c) s += d[c] * r[c];
    dw[dw_off + slot] = s;
}
