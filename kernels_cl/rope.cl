/* In-place half-split RoPE (MODEL.md 2, Hugging Face rotate_half) on x[B, T, nh, hd]; row t has
 * absolute position pos0 + t. inverse rotates by -angle (the backward pass). One work-item per
 * (b, t, pair i) rotates pair (i, i + hd/2) of every head, so each angle's cos / sin is
 * computed once per position. */
__kernel void mt_rope(__global float* x, long x_off, long B, long T, long nh, long hd,
                      float theta, long pos0, int inverse) {
    long hh = hd / 2;
    long idx = get_global_id(0);
    if (idx >= B * T * hh) return;
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
