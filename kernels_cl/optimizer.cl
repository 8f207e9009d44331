/* AdamW, 8-bit AdamW and SGD updates (MODEL.md 4, mt_math.h). The gradient is first scaled
 * by grad_scale and clipped by the global norm held in gnorm_sq[0] (when has_norm). */

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

/* 8-bit AdamW: one work-group per block of MT_QBLOCK elements. Work-item l updates elements
 * l, l + lsize, ... of the block (mt_adamw8bit_update) and keeps their new m, v in local
 * memory; after the work-group maxima (the block's new absmax) every element is requantised.
 * table: the MT_QMAP_LEN maps. The gradient factor is grad_scale * clip coefficient, as on the
 * CPU backend, so the codes match it bit for bit. */
__kernel void mt_adamw8bit(__global float* p, long p_off, __global const float* g, long g_off,
                           __global uchar* mc, long mc_off, __global uchar* vc, long vc_off,
                           __global float* ma, long ma_off, __global float* va, long va_off,
                           __constant float* table, long table_off, long n, float lr, float b1,
                           float b2, float eps, float wd, float bc1, float bc2,
                           __global const float* gnorm_sq, long gnorm_off, int has_norm, float clip,
                           float grad_scale) {
    __local float lm[MT_QBLOCK], lv[MT_QBLOCK], scratch[MT_WG_MAX];
    long b = get_group_id(0), i0 = b * MT_QBLOCK;
    int len = (int)min((long)MT_QBLOCK, n - i0);
    int lid = (int)get_local_id(0), lsz = (int)get_local_size(0);
    __constant float* map = table + table_off;
    float c = has_norm ? mt_clip_coef(gnorm_sq[gnorm_off], grad_scale, clip) : 1.0f;
    float gs = grad_scale * c;
    float am = ma[ma_off + b], av = va[va_off + b];
    float m_max = 0.0f, v_max = 0.0f;
    for (int k = lid; k < len; k += lsz) {
        long i = i0 + k;
        float pp = p[p_off + i], mm, vv;
        mt_adamw8bit_update(&pp, &mm, &vv, map, mc[mc_off + i], vc[vc_off + i], am, av,
                            g[g_off + i] * gs, lr, b1, b2, eps, wd, bc1, bc2);
        p[p_off + i] = pp;
        lm[k] = mm;
        lv[k] = vv;
        m_max = fmax(m_max, fabs(mm));
        v_max = fmax(v_max, vv);
    }
    m_max = mt_wg_max(m_max, scratch); /* its barriers also publish lm, lv */
    v_max = mt_wg_max(v_max, scratch);
    if (lid == 0) {
        ma[ma_off + b] = m_max;
        va[va_off + b] = v_max;
    }
    for (int k = lid; k < len; k += lsz) {
        int m_code, v_code;
        mt_requantize(map, lm[k], lv[k], m_max, v_max, &m_code, &v_code);
        mc[mc_off + i0 + k] = (uchar)m_code;
        vc[vc_off + i0 + k] = (uchar)v_code;
    }
}

__kernel void mt_sgd(__global float* p, long p_off, __global const float* g, long g_off, long n,
                     float lr, __global const float* gnorm_sq, long gnorm_off, int has_norm,
                     float clip, float grad_scale) {
    long i = get_global_id(0);
    if (i >= n) return;
    float gg = mt_scaled_grad(g[g_off + i], gnorm_sq + gnorm_off, has_norm, clip, grad_scale);
    p[p_off + i] -= lr * gg;
}
