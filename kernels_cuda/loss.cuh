// Cross-entropy over the vocabulary, one block per row: losses[n] = lse - logit[target];
// with grad_scale != 0 the logits row is overwritten by grad_scale * (softmax - onehot)
// (zeros for an ignored row, target -1). Any other target outside [0, V) is reported and gives a
// NaN loss. The row is read twice, not three times (llm.c's fused classifier does the same):
// one pass keeps each thread's running maximum and its sum of exponentials rescaled to it (the
// online softmax), the block combines them into the log-sum-exp, and the gradient pass reads the
// row once more and overwrites it. Each thread visits its columns in a fixed order and the block
// reductions have a fixed shape, so the result does not depend on scheduling. The target logit
// is read into shared memory before the barrier that precedes any overwrite.
#pragma once

#include "common.cuh"

namespace mtk {

__global__ void cross_entropy_kernel(float* __restrict__ losses, float* __restrict__ logits,
                                     const int32_t* __restrict__ targets, int64_t V,
                                     float grad_scale, int32_t* err) {
    __shared__ float target_logit;
    float* l = logits + blockIdx.x * V;
    const int32_t t = targets[blockIdx.x];
    float m = -INFINITY, s = 0.0f;  // this thread's maximum, sum of expf(x - m)
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
        const float x = l[c];
        if (c == t) target_logit = x;
        if (x > m) {
            s = s * expf(m - x) + 1.0f;  // expf(-inf) = 0 before the first finite value
            m = x;
        } else {
            s += x == -INFINITY ? 0.0f : expf(x - m);  // a NaN logit makes the sum NaN
        }
    }
    const float row_max = block_max(m);  // its barriers publish target_logit
    const float lse =                    // every read of l[] happens before block_sum's barrier
        row_max + logf(block_sum(m == -INFINITY ? 0.0f : s * expf(m - row_max)));
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
