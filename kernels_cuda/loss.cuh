// Cross-entropy over the vocabulary, one block per row: losses[n] = lse - logit[target];
// with grad_scale != 0 the logits row is overwritten by grad_scale * (softmax - onehot)
// (zeros for an ignored row, target -1). Any other target outside [0, V) is reported and gives a
// NaN loss. The target logit is read into shared memory before the barrier that precedes any
// overwrite.
#pragma once

#include "common.cuh"

namespace mtk {

__global__ void cross_entropy_kernel(float* __restrict__ losses, float* __restrict__ logits,
                                     const int32_t* __restrict__ targets, int64_t V,
                                     float grad_scale, int32_t* err) {
    __shared__ float target_logit;
    float* l = logits + blockIdx.x * V;
    const int32_t t = targets[blockIdx.x];
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
        m = fmaxf(m, l[c]);
        if (c == t) target_logit = l[c];
    }
    m = block_max(m);  // its barriers publish target_logit
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) s += expf(l[c] - m);
    const float lse = m + logf(block_sum(s));  // every read of l[] happens before this barrier
    const bool valid = in_range(t, V);
    if (threadIdx.x == 0) {
        losses[blockIdx.x] = t == -1 ? 0.0f : valid ? lse - target_logit : NAN;
        if (!valid && t != -1) report_error(err, kErrTarget, t);
    }
    if (grad_scale == 0.0f) return;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x)
        l[c] = t == -1 ? 0.0f : grad_scale * (expf(l[c] - lse) - (c == t ? 1.0f : 0.0f));
}

void cross_entropy(Stream s, float* losses, float* logits, const int32_t* targets, int64_t N,
                   int64_t V, float grad_scale, int32_t* err) {
    if (N > 0 && V > 0)
        MT_LAUNCH(cross_entropy_kernel, per_row(N, V), s, losses, logits, targets, V, grad_scale,
                  err);
}

}  // namespace mtk
