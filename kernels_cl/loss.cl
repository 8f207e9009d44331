/* Cross-entropy over rows of logits (MODEL.md 3), one work-group per row. targets = -1 is
 * ignored (loss 0, zero gradient row); any other target outside [0, V) is reported (code 1)
 * and gives a NaN loss rather than an out-of-bounds read. With grad_scale != 0 the gradient
 * grad_scale * (softmax - onehot) is written to grad (the logits themselves, or a separate
 * tensor of dtype grad_kind: mt_store_float). */
__kernel void mt_cross_entropy(__global float* losses, long losses_off, __global float* logits,
                               long logits_off, __global const int* targets, long targets_off,
                               long V, float grad_scale, __global int* err, long err_off,
                               __global float* grad, long grad_off, int grad_kind) {
    __local float scratch[MT_WG_MAX];
    long n = get_group_id(0);
    int lid = (int)get_local_id(0), lsz = (int)get_local_size(0);
    __global float* lr = logits + logits_off + n * V;
    int t = targets[targets_off + n];
    int valid = t >= 0 && t < V;
    float lt = valid ? lr[t] : 0.0f; /* read before any work-item overwrites the row */
    float m, s;
    mt_wg_softmax_stats(lr, V, 1.0f, scratch, &m, &s);
    float lse = m + mt_logf(s);
    if (lid == 0) {
        losses[losses_off + n] = t == -1 ? 0.0f : valid ? lse - lt : NAN;
        if (!valid && t != -1) mt_report(err + err_off, 1, t);
    }
    if (grad_scale == 0.0f) return;
    float inv = 1.0f / s;
    for (long c = lid; c < V; c += lsz) {
        float g = t == -1 ? 0.0f : grad_scale * (mt_expf(lr[c] - m) * inv - (c == t ? 1.0f : 0.0f));
        mt_store_float(grad, grad_off + n * V + c, g, grad_kind);
    }
}
