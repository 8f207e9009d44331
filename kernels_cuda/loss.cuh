// Cross-entropy over the vocabulary, one block per row: losses[n] = lse - logit[target];
// with grad_scale != 0 the gradient grad_scale * (softmax - onehot) (zeros for an ignored row,
// target -1) is written to grad: the logits row itself, or a separate row of dtype grad_kind
// (16-bit: rounded from the f32 value, store_from_f32). Any other target outside [0, V) is reported
// and gives a NaN loss. The row is read twice, not three times (llm.c's fused classifier does the
// same): one pass keeps each thread's running maximum and its sum of exponentials rescaled to it
// (the online softmax), the block combines them into the log-sum-exp, and the gradient pass reads
// the row once more and writes the gradient. Columns go to the threads in quads (thread i: columns
// 4q .. 4q + 3 for q = i, i + blockDim, ..., in order), read and written as one vector when the
// rows allow it (V % 4 == 0 and both rows at the start of a group) and one by one otherwise: the
// same values in the same order, so the same bits either way. Each thread's order is fixed and the
// block reductions have a fixed shape, so the result does not depend on scheduling. The target
// logit is read into shared memory before the barrier that precedes any overwrite.
#pragma once

#include "common.cuh"
#include "vector_access.cuh"

namespace mtk {

// Calls body(Width<4>{}, c) for the quads of a row of V columns this thread takes, or
// body(Width<1>{}, c) for each of their columns when vec is false (see above).
template <typename Body>
__device__ __forceinline__ void for_row_quads(int64_t V, bool vec, Body body) {
    const int64_t quads = (V + 3) / 4;
    for (int64_t q = threadIdx.x; q < quads; q += blockDim.x) {
        const int64_t c0 = 4 * q;
        if (vec) {
            body(Width<4>{}, c0);
        } else {
            for (int64_t c = c0; c < c0 + 4 && c < V; ++c) body(Width<1>{}, c);
        }
    }
}

// Adds x to a running maximum m and sum s of expf(. - m) (the online softmax).
__device__ __forceinline__ void online_softmax_add(float& m, float& s, float x) {
    if (x > m) {
        s = s * expf(m - x) + 1.0f;  // expf(-inf) = 0 before the first finite value
        m = x;
    } else {
        s += x == -INFINITY ? 0.0f : expf(x - m);  // a NaN logit makes the sum NaN
    }
}

// grad may be logits (in place: each element is read before the same thread writes it).
__global__ void cross_entropy_kernel(float* __restrict__ losses, const float* logits,
                                     const int32_t* __restrict__ targets, int64_t V,
                                     float grad_scale, int32_t* err, void* grad, int grad_kind) {
    __shared__ float target_logit;
    const float* l = logits + blockIdx.x * V;
    void* gr = static_cast<char*>(grad) + blockIdx.x * V * kind_bytes(grad_kind);
    const int32_t t = targets[blockIdx.x];
    const bool vec = rows_vectorisable(V, l, VecPtr{gr, kind_bytes(grad_kind)});
    float m = -INFINITY, s = 0.0f;  // this thread's maximum, sum of expf(x - m)
    for_row_quads(V, vec, [&](auto w, int64_t c0) {
        const auto x = load_lanes(w, l + c0);
#pragma unroll
        for (int u = 0; u < w.n; ++u) {
            if (c0 + u == t) target_logit = x[u];
            online_softmax_add(m, s, x[u]);
        }
    });
    const float row_max = block_max(m);  // its barriers publish target_logit
    const float lse =                    // every read of l[] happens before block_sum's barrier
        row_max + logf(block_sum(m == -INFINITY ? 0.0f : s * expf(m - row_max)));
    const bool valid = in_range(t, V);
    if (threadIdx.x == 0) {
        losses[blockIdx.x] = t == -1 ? 0.0f : valid ? lse - target_logit : NAN;
        if (!valid && t != -1) report_error(err, kErrTarget, t);
    }
    if (grad_scale == 0.0f) return;
    for_row_quads(V, vec, [&](auto w, int64_t c0) {
        auto x = load_lanes(w, l + c0);
#pragma unroll
        for (int u = 0; u < w.n; ++u)
            x[u] = t == -1 ? 0.0f : grad_scale * (expf(x[u] - lse) - (c0 + u == t ? 1.0f : 0.0f));
        store_from_f32(w, gr, grad_kind, c0, x);
    });
}

// grad: where the gradient goes (nullptr: over the logits), of dtype grad_kind.
void cross_entropy(Stream s, float* losses, float* logits, const int32_t* targets, int64_t N,
                   int64_t V, float grad_scale, int32_t* err, void* grad = nullptr,
                   FloatKind grad_kind = FloatKind::f32) {
    if (N > 0 && V > 0)
        MT_LAUNCH(cross_entropy_kernel, per_row(N, V), s, losses, logits, targets, V, grad_scale,
                  err, grad ? grad : logits, grad ? static_cast<int>(grad_kind) : 0);
}

}  // namespace mtk
