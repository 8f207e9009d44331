/* RMSNorm and LayerNorm (MODEL.md 2), one work-group per row for the row statistics and dx;
 * the gain/bias gradients are column sums done in row chunks (partials, then mt_colsum_finish
 * of reduce.cl), so they are deterministic. */

/* y of dtype y_kind (0 f32, 1 bf16, 2 f16: mt_store_float). */
__kernel void mt_rmsnorm_fwd(__global float* y, long y_off, __global float* rstd, long rstd_off,
                             __global const float* x, long x_off, __global const float* g,
                             long g_off, long dim, float eps, int y_kind) {
    MT_ROW_PER_WORK_GROUP(xr, x + x_off, dim);
    long yr = y_off + r * dim;
    float ss = 0.0f;
    for (long c = lid; c < dim; c += lsz) ss += xr[c] * xr[c];
    ss = mt_wg_sum(ss, scratch);
    float rs = 1.0f / mt_sqrtf(ss / (float)dim + eps);
    for (long c = lid; c < dim; c += lsz)
        mt_store_float(y, yr + c, xr[c] * rs * g[g_off + c], y_kind);
    if (lid == 0) rstd[rstd_off + r] = rs;
}

/* dx = rstd * (dy*g - x * rstd^2 * mean(dy*g*x)); dx += ... when accumulate. */
__kernel void mt_rmsnorm_bwd_dx(__global float* dx, long dx_off, __global const float* dy,
                                long dy_off, __global const float* x, long x_off,
                                __global const float* g, long g_off, __global const float* rstd,
                                long rstd_off, long dim, int accumulate) {
    MT_ROW_PER_WORK_GROUP(xr, x + x_off, dim);
    __global const float* dyr = dy + dy_off + r * dim;
    __global float* dxr = dx + dx_off + r * dim;
    float dot = 0.0f;
    for (long c = lid; c < dim; c += lsz) dot += dyr[c] * g[g_off + c] * xr[c];
    dot = mt_wg_sum(dot, scratch);
    float rs = rstd[rstd_off + r];
    float k = rs * rs * dot / (float)dim;
    for (long c = lid; c < dim; c += lsz) {
        float v = rs * (dyr[c] * g[g_off + c] - xr[c] * k);
        dxr[c] = accumulate ? dxr[c] + v : v;
    }
}

/* partial[ch, c] = sum over the chunk's rows of dy * x * rstd; 2-D range (c, ch). */
__kernel void mt_rmsnorm_dg_partial(__global float* partial, long partial_off,
                                    __global const float* dy, long dy_off, __global const float* x,
                                    long x_off, __global const float* rstd, long rstd_off,
                                    long rows, long dim, long chunk_rows) {
    long c = get_global_id(0), ch = get_global_id(1);
    if (c >= dim) return;
    long r0 = ch * chunk_rows, r1 = min(rows, r0 + chunk_rows);
    float acc = 0.0f;
    for (long r = r0; r < r1; ++r)
        acc += dy[dy_off + r * dim + c] * x[x_off + r * dim + c] * rstd[rstd_off + r];
    partial[partial_off + ch * dim + c] = acc;
}

/* y = (x - mean) * rstd * g + b (has_b), two-pass mean / biased variance; y of dtype y_kind. */
__kernel void mt_layernorm_fwd(__global float* y, long y_off, __global float* mean, long mean_off,
                               __global float* rstd, long rstd_off, __global const float* x,
                               long x_off, __global const float* g, long g_off,
                               __global const float* b, long b_off, int has_b, long dim, float eps,
                               int y_kind) {
    MT_ROW_PER_WORK_GROUP(xr, x + x_off, dim);
    long yr = y_off + r * dim;
    float s = 0.0f;
    for (long c = lid; c < dim; c += lsz) s += xr[c];
    float mu = mt_wg_sum(s, scratch) / (float)dim;
    float v = 0.0f;
    for (long c = lid; c < dim; c += lsz) v += (xr[c] - mu) * (xr[c] - mu);
    float rs = 1.0f / mt_sqrtf(mt_wg_sum(v, scratch) / (float)dim + eps);
    for (long c = lid; c < dim; c += lsz) {
        float o = (xr[c] - mu) * rs * g[g_off + c];
        mt_store_float(y, yr + c, has_b ? o + b[b_off + c] : o, y_kind);
    }
    if (lid == 0) {
        mean[mean_off + r] = mu;
        rstd[rstd_off + r] = rs;
    }
}

/* dx = rstd * (dy*g - mean(dy*g) - xhat * mean(dy*g*xhat)), xhat = (x - mean) * rstd. */
__kernel void mt_layernorm_bwd_dx(__global float* dx, long dx_off, __global const float* dy,
                                  long dy_off, __global const float* x, long x_off,
                                  __global const float* g, long g_off, __global const float* mean,
                                  long mean_off, __global const float* rstd, long rstd_off,
                                  long dim, int accumulate) {
    MT_ROW_PER_WORK_GROUP(xr, x + x_off, dim);
    __global const float* dyr = dy + dy_off + r * dim;
    __global float* dxr = dx + dx_off + r * dim;
    float mu = mean[mean_off + r], rs = rstd[rstd_off + r];
    float a = 0.0f, bsum = 0.0f;
    for (long c = lid; c < dim; c += lsz) {
        float dg = dyr[c] * g[g_off + c];
        a += dg;
        bsum += dg * (xr[c] - mu) * rs;
    }
    a = mt_wg_sum(a, scratch) / (float)dim;
    bsum = mt_wg_sum(bsum, scratch) / (float)dim;
    for (long c = lid; c < dim; c += lsz) {
        float xhat = (xr[c] - mu) * rs;
        float v = rs * (dyr[c] * g[g_off + c] - a - xhat * bsum);
        dxr[c] = accumulate ? dxr[c] + v : v;
    }
}

/* dg partial = sum dy * xhat, db partial = sum dy (has_b) per row chunk; 2-D range (c, ch). */
__kernel void mt_layernorm_dgdb_partial(__global float* pg, long pg_off, __global float* pb,
                                        long pb_off, int has_b, __global const float* dy,
                                        long dy_off, __global const float* x, long x_off,
                                        __global const float* mean, long mean_off,
                                        __global const float* rstd, long rstd_off, long rows,
                                        long dim, long chunk_rows) {
    long c = get_global_id(0), ch = get_global_id(1);
    if (c >= dim) return;
    long r0 = ch * chunk_rows, r1 = min(rows, r0 + chunk_rows);
    float ag = 0.0f, ab = 0.0f;
    for (long r = r0; r < r1; ++r) {
        float d = dy[dy_off + r * dim + c];
        ag += d * (x[x_off + r * dim + c] - mean[mean_off + r]) * rstd[rstd_off + r];
        ab += d;
    }
    pg[pg_off + ch * dim + c] = ag;
    if (has_b) pb[pb_off + ch * dim + c] = ab;
}
