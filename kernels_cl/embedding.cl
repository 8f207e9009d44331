/* Token embedding lookup and its gradient. An id outside the table never reads or writes out
 * of bounds: it is reported (codes 4, 5), the forward yields NaN and the backward skips it. */

/* out[i, c] (+)= table[ids[i], c]; 2-D range (c, i). */
__kernel void mt_embedding_fwd(__global float* out, long out_off, __global const float* table,
                               long table_off, __global const int* ids, long ids_off, long n,
                               long dim, long table_rows, int accumulate, __global int* err,
                               long err_off) {
    long c = get_global_id(0), i = get_global_id(1);
    if (c >= dim || i >= n) return;
    int id = ids[ids_off + i];
    int ok = id >= 0 && id < table_rows;
    if (!ok && c == 0) mt_report(err + err_off, 4, id);
    float v = ok ? table[table_off + (long)id * dim + c] : NAN;
    __global float* o = out + out_off + i * dim + c;
    *o = accumulate ? *o + v : v;
}

/* dtable[ids[i], c] += dout[i, c]: one work-item per column walks the ids in order, so
 * duplicate ids are summed deterministically without atomics. */
__kernel void mt_embedding_bwd(__global float* dtable, long dtable_off, __global const float* dout,
                               long dout_off, __global const int* ids, long ids_off, long n,
                               long dim, long table_rows, __global int* err, long err_off) {
    long c = get_global_id(0);
    if (c >= dim) return;
    for (long i = 0; i < n; ++i) {
        int id = ids[ids_off + i];
        if (id >= 0 && id < table_rows)
            dtable[dtable_off + (long)id * dim + c] += dout[dout_off + i * dim + c];
        else if (c == 0)
            mt_report(err + err_off, 5, id);
    }
}
