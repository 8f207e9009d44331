/* Activations (MODEL.md 2, formulas from mt_math.h) and the row-wise softmax.
 * act codes follow moetrain::Act: 0 = gelu (tanh), 1 = relu, 2 = silu. */

inline float mt_act(int act, float z) {
    return act == 0 ? mt_gelu(z) : act == 1 ? mt_relu(z) : mt_silu(z);
}
inline float mt_act_grad(int act, float z) {
    return act == 0 ? mt_gelu_grad(z) : act == 1 ? mt_relu_grad(z) : mt_silu_grad(z);
}

/* y of dtype y_kind (0 f32, 1 bf16, 2 f16: mt_store_float). */
__kernel void mt_act_fwd(__global float* y, long y_off, __global const float* x, long x_off, long n,
                         int act, int y_kind) {
    long i = get_global_id(0);
    if (i >= n) return;
    mt_store_float(y, y_off + i, mt_act(act, x[x_off + i]), y_kind);
}

/* dx of dtype dx_kind (an f32 dx may be dy: each work-item reads its element first). */
__kernel void mt_act_bwd(__global float* dx, long dx_off, __global const float* dy, long dy_off,
                         __global const float* x, long x_off, long n, int act, int dx_kind) {
    long i = get_global_id(0);
    if (i >= n) return;
    mt_store_float(dx, dx_off + i, dy[dy_off + i] * mt_act_grad(act, x[x_off + i]), dx_kind);
}

/* h = silu(gate) * up, h of dtype h_kind */
__kernel void mt_swiglu_fwd(__global float* h, long h_off, __global const float* gate,
                            long gate_off, __global const float* up, long up_off, long n,
                            int h_kind) {
    long i = get_global_id(0);
    if (i >= n) return;
    mt_store_float(h, h_off + i, mt_silu(gate[gate_off + i]) * up[up_off + i], h_kind);
}

/* dgate = dh * up * silu'(gate), dup = dh * silu(gate) */
__kernel void mt_swiglu_bwd(__global float* dgate, long dgate_off, __global float* dup,
                            long dup_off, __global const float* dh, long dh_off,
                            __global const float* gate, long gate_off, __global const float* up,
                            long up_off, long n) {
    long i = get_global_id(0);
    if (i >= n) return;
    float g = gate[gate_off + i], d = dh[dh_off + i];
    float u = up[up_off + i];
    dgate[dgate_off + i] = d * u * mt_silu_grad(g);
    dup[dup_off + i] = d * mt_silu(g);
}

/* Row-wise stable softmax, one work-group per row; y may alias x (each element is read and
 * written by the same work-item). */
__kernel void mt_softmax(__global float* y, long y_off, __global const float* x, long x_off,
                         long cols) {
    MT_ROW_PER_WORK_GROUP(xr, x + x_off, cols);
    __global float* yr = y + y_off + r * cols;
    float m, s;
    mt_wg_softmax_stats(xr, cols, 1.0f, scratch, &m, &s);
    float inv = 1.0f / s;
    for (long c = lid; c < cols; c += lsz) yr[c] = mt_expf(xr[c] - m) * inv;
}
