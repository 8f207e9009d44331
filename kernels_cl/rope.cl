/* In-place half-split RoPE (MODEL.md 2, Hugging Face rotate_half) on x[B, T, nh, hd]; row t has
 * absolute position pos0 + pd[0] + t (pd: the device-side offset, when has_pd). inverse rotates
 * by -angle (the backward pass). One work-item per (b, t, pair i) rotates pair (i, i + hd/2) of
 * every head, so each angle's cos / sin is computed once per position. Positions outside
 * [0, MT_POS_LIMIT) are reported (code 11) and nothing is rotated. */
__kernel void mt_rope(__global float* x, long x_off, long B, long T, long nh, long hd, float theta,
                      long pos0, __global const int* pd, long pd_off, int has_pd, int inverse,
                      __global int* err, long err_off) {
    long hh = hd / 2;
    long idx = get_global_id(0);
    if (idx >= B * T * hh) return;
    long offset = mt_dev_value(pd, pd_off, has_pd);
    pos0 += offset;
    if (pos0 < 0 || pos0 + T > MT_POS_LIMIT) {
        if (idx == 0) mt_report(err + err_off, 11, (int)offset);
        return;
    }
    int i = (int)(idx % hh);
    long bt = idx / hh; /* b * T + t */
    long t = bt % T;
    float angle = mt_rope_angle(theta, i, (int)hd, (int)(pos0 + t));
    float c = mt_cosf(angle), s = mt_sinf(angle);
    if (inverse) s = -s;
    __global float* p = x + x_off + bt * nh * hd;
    for (long h = 0; h < nh; ++h, p += hd) {
        float a = p[i], b = p[i + hh];
        p[i] = a * c - b * s;
        p[i + hh] = b * c + a * s;
    }
}
