/* Element-wise dense algebra: add, axpby, bias add, and the C = beta * C scaling GEMM needs
 * when k == 0. Every tensor is a (buffer, element offset) pair. */

__kernel void mt_add(__global float* out, long out_off, __global const float* a, long a_off,
                     __global const float* b, long b_off, long n) {
    long i = get_global_id(0);
    if (i >= n) return;
    out[out_off + i] = a[a_off + i] + b[b_off + i];
}

/* y = alpha * x + beta * y; beta == 0 ignores the old y (BLAS convention: NaN-safe). */
__kernel void mt_axpby(__global float* y, long y_off, float alpha, __global const float* x,
                       long x_off, float beta, long n) {
    long i = get_global_id(0);
    if (i >= n) return;
    float r = alpha * x[x_off + i];
    if (beta != 0.0f) r += beta * y[y_off + i];
    y[y_off + i] = r;
}

/* y[r, c] += bias[c]; 2-D range (c, r). */
__kernel void mt_add_bias(__global float* y, long y_off, __global const float* bias, long bias_off,
                          long rows, long cols) {
    long c = get_global_id(0), r = get_global_id(1);
    if (c >= cols || r >= rows) return;
    y[y_off + r * cols + c] += bias[bias_off + c];
}

/* C[r, c] = beta * C[r, c] for an m x n matrix with row stride ldc (beta == 0 writes zeros). */
__kernel void mt_scale_matrix(__global float* c, long c_off, long m, long n, long ldc, float beta) {
    long j = get_global_id(0), r = get_global_id(1);
    if (j >= n || r >= m) return;
    __global float* p = c + c_off + r * ldc + j;
    *p = beta == 0.0f ? 0.0f : beta * *p;
}
