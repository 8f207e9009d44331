/* Deterministic reductions: a fixed number of work-groups writes partial sums, one more kernel
 * adds them up in a fixed order. No float atomics anywhere. */

/* partial[group] = sum over x[group * chunk, min(n, (group + 1) * chunk)) (squared when
 * square != 0). Each group owns one contiguous chunk, read as float4 quads: work-item l takes
 * quads l, l + lsize, ... (coalesced on GPUs; one work-item per group on CPU devices walks its
 * chunk in order), with four independent lane sums added up in a fixed order at the end. The
 * last quad of a chunk may be partial; exactly one work-item finishes it element by element.
 * (A grid-stride loop over the whole of x made each CPU work-item touch a new cache line per
 * element: 0.2 GB/s.) */
__kernel void mt_sum_partial(__global float* partial, long partial_off, __global const float* x,
                             long x_off, long n, int square, long chunk) {
    __local float scratch[MT_WG_MAX];
    long start = (long)get_group_id(0) * chunk;
    long end = min(n, start + chunk);
    long stride = 4 * (long)get_local_size(0);
    float4 acc = (float4)(0.0f);
    long i = start + 4 * (long)get_local_id(0);
    for (; i + 4 <= end; i += stride) {
        float4 v = vload4(0, x + x_off + i);
        acc += square ? v * v : v;
    }
    float tail = 0.0f;
    for (; i < end; ++i) {
        float v = x[x_off + i];
        tail += square ? v * v : v;
    }
    float total = mt_wg_sum((acc.x + acc.y) + (acc.z + acc.w) + tail, scratch);
    if (get_local_id(0) == 0) partial[partial_off + get_group_id(0)] = total;
}

/* out[0] = (accumulate ? out[0] : 0) + scale * sum(partial[0..count)); one work-group. */
__kernel void mt_sum_finish(__global float* out, long out_off, __global const float* partial,
                            long partial_off, long count, float scale, int accumulate) {
    __local float scratch[MT_WG_MAX];
    float acc = 0.0f;
    for (long i = get_local_id(0); i < count; i += get_local_size(0))
        acc += partial[partial_off + i];
    float total = mt_wg_sum(acc, scratch);
    if (get_local_id(0) == 0) {
        float r = scale * total;
        out[out_off] = accumulate ? out[out_off] + r : r;
    }
}

/* partial[ch, c] = sum of src[r, c] over the rows of chunk ch; 2-D range (c, ch). */
__kernel void mt_colsum_partial(__global float* partial, long partial_off,
                                __global const float* src, long src_off, long rows, long cols,
                                long chunk_rows, int src_kind) {
    long c = get_global_id(0), ch = get_global_id(1);
    if (c >= cols) return;
    long r0 = ch * chunk_rows, r1 = min(rows, r0 + chunk_rows);
    float acc = 0.0f;
    for (long r = r0; r < r1; ++r) acc += mt_load_float(src, src_off + r * cols + c, src_kind);
    partial[partial_off + ch * cols + c] = acc;
}

/* dst[c] = (accumulate ? dst[c] : 0) + sum over chunks of partial[ch, c], in chunk order. */
__kernel void mt_colsum_finish(__global float* dst, long dst_off, __global const float* partial,
                               long partial_off, long chunks, long cols, int accumulate) {
    long c = get_global_id(0);
    if (c >= cols) return;
    float acc = 0.0f;
    for (long ch = 0; ch < chunks; ++ch) acc += partial[partial_off + ch * cols + c];
    dst[dst_off + c] = accumulate ? dst[dst_off + c] + acc : acc;
}
