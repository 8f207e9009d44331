/* MoE load control (MODEL.md 2): capacity admission in priority order (slot j, then token n)
 * as a chunked counting pass over that order (per-chunk histograms, their running sums per
 * expert, then an in-order admission per (expert, chunk)), and the i32 expert-count
 * accumulator. Priority position p = j * N + n is the selection (n, j). */

/* hist[ch, e] = number of selections of e among priority positions of chunk ch; an expert
 * index outside [0, E) is reported (code 9) and counted nowhere. 2-D range (e, ch). */
__kernel void mt_capacity_count(__global int* hist, long hist_off, __global const int* topk_idx,
                                long idx_off, long N, int k, long chunk, int E, __global int* err,
                                long err_off) {
    long e = get_global_id(0), ch = get_global_id(1);
    if (e >= E) return;
    long slots = N * k;
    long p0 = ch * chunk, p1 = min(slots, p0 + chunk);
    int c = 0;
    for (long p = p0; p < p1; ++p) {
        long j = p / N, n = p - j * N;
        int x = topk_idx[idx_off + n * k + j];
        c += x == e;
        if (e == 0 && (x < 0 || x >= E)) mt_report(err + err_off, 9, x);
    }
    hist[hist_off + ch * E + e] = c;
}

/* counts[e] = sum over chunks of hist[ch, e]; hist[ch, e] becomes the selections of e in the
 * chunks before ch. One work-item per expert. */
__kernel void mt_capacity_offsets(__global int* counts, long counts_off, __global int* hist,
                                  long hist_off, long chunks, int E) {
    long e = get_global_id(0);
    if (e >= E) return;
    int run = 0;
    for (long ch = 0; ch < chunks; ++ch) {
        int c = hist[hist_off + ch * E + e];
        hist[hist_off + ch * E + e] = run;
        run += c;
    }
    counts[counts_off + e] = run;
}

/* kept_idx[n, j] = e when offsets[j, e] + (selections of e before it in priority order) is
 * below capacity, else -1; hist[ch, e] holds the selections of e before chunk ch. */
__kernel void mt_capacity_admit(__global int* kept_idx, long kept_off, __global const int* hist,
                                long hist_off, __global const int* topk_idx, long idx_off,
                                __global const int* offsets, long offsets_off, int has_offsets,
                                long N, int k, long chunk, int E, long capacity) {
    long e = get_global_id(0), ch = get_global_id(1);
    if (e >= E) return;
    long slots = N * k;
    long p0 = ch * chunk, p1 = min(slots, p0 + chunk);
    long run = hist[hist_off + ch * E + e];
    for (long p = p0; p < p1; ++p) {
        long j = p / N, n = p - j * N;
        int x = topk_idx[idx_off + n * k + j];
        if (x != e) continue;
        long before = run + (has_offsets ? offsets[offsets_off + j * E + e] : 0);
        kept_idx[kept_off + n * k + j] = before < capacity ? e : -1;
        ++run;
    }
}

/* shares[q, j, e] = (q != rank ? sum over j' < j of c[j', e] : 0) + (rank < q ? c[j, e] : 0)
 * for q < ranks, where c[j, e] = hist[j, e] is this rank's selections of e in slot j
 * (mt_capacity_count with one chunk per slot). One work-item per expert. */
__kernel void mt_capacity_shares(__global int* shares, long shares_off, __global const int* hist,
                                 long hist_off, int k, int E, long rank, long ranks) {
    long e = get_global_id(0);
    if (e >= E) return;
    int higher = 0;
    for (int j = 0; j < k; ++j) {
        int cj = hist[hist_off + (long)j * E + e];
        for (long q = 0; q < ranks; ++q)
            shares[shares_off + (q * k + j) * E + e] =
                (q != rank ? higher : 0) + (rank < q ? cj : 0);
        higher += cj;
    }
}

/* acc[i] += counts[i] */
__kernel void mt_add_counts(__global int* acc, long acc_off, __global const int* counts,
                            long counts_off, long n) {
    long i = get_global_id(0);
    if (i < n) acc[acc_off + i] += counts[counts_off + i];
}
