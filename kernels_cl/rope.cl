/* In-place half-split RoPE (MODEL.md 2, Hugging Face rotate_half) on x[B, T, nh, hd]; row t has
 * absolute position pos0 + t. inverse rotates by -angle (the backward pass). One work-item per
 * rotated pair (i, i + hd/2). */
__kernel void mt_rope(__global float* x, long x_off, long B, long T, long nh, long hd,
                      float theta, long pos0, int inverse) {
    long hh = hd / 2;
    long idx = get_global_id(0);
    if (idx >= B * T * nh * hh) return;
    int i = (int)(idx % hh);
    long row = idx / hh; /* (b * T + t) * nh + head */
    long t = (row / nh) % T;
    float angle = mt_rope_angle(theta, i, (int)hd, (int)(pos0 + t));
    float c = mt_cosf(angle), s = mt_sinf(angle);
    if (inverse) s = -s;
    __global float* p = x + x_off + row * hd;
    float a = p[i], b = p[i + hh];
    p[i] = a * c - b * s;
    p[i + hh] = b * c + a * s;
}
