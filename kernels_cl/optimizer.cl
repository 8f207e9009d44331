/* AdamW and SGD element updates (MODEL.md 4, mt_math.h). The gradient is first scaled by
 * grad_scale and clipped by the global norm held in gnorm_sq[0] (when has_norm). */

inline float mt_scaled_grad(float g, __global const float* gnorm_sq, int has_norm, float clip,
                            float grad_scale) {
    float c = has_norm ? mt_clip_coef(gnorm_sq[0], grad_scale, clip) : 1.0f;
    return g * grad_scale * c;
}

__kernel void mt_adamw(__global float* p, long p_off, __global const float* g, long g_off,
                       __global float* m, long m_off, __global float* v, long v_off, long n,
                       float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                       __global const float* gnorm_sq, long gnorm_off, int has_norm, float clip,
                       float grad_scale) {
    long i = get_global_id(0);
    if (i >= n) return;
    float gg = mt_scaled_grad(g[g_off + i], gnorm_sq + gnorm_off, has_norm, clip, grad_scale);
    float pp = p[p_off + i], mm = m[m_off + i], vv = v[v_off + i];
    mt_adamw_update(&pp, &mm, &vv, gg, lr, b1, b2, eps, wd, bc1, bc2);
    p[p_off + i] = pp;
    m[m_off + i] = mm;
    v[v_off + i] = vv;
}

__kernel void mt_sgd(__global float* p, long p_off, __global const float* g, long g_off, long n,
                     float lr, __global const float* gnorm_sq, long gnorm_off, int has_norm,
                     float clip, float grad_scale) {
    long i = get_global_id(0);
    if (i >= n) return;
    float gg = mt_scaled_grad(g[g_off + i], gnorm_sq + gnorm_off, has_norm, clip, grad_scale);
    p[p_off + i] -= lr * gg;
}
