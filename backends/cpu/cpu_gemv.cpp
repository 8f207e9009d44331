// The one-row product c = alpha * x W^T + beta * c of the CPU gemm (cpu_gemv.h): each thread
// streams its contiguous block of W's rows once, four rows at a time. The dot products use the
// fixed lanes of cpu_simd.h (element i goes to lane i % kLanes, the lanes are folded
// pairwise), so c[j] does not depend on the thread count. With compute = bf16 the W elements
// are widened (bf16) or rounded (f32) on the fly and x is rounded once per call.
#include "cpu/cpu_gemv.h"

#if defined(_OPENMP)
#include <omp.h>
#endif
#include <cstring>

#include "cpu/cpu_parallel.h"
#include "cpu/cpu_round16.h"
#include "cpu/cpu_simd.h"

namespace moetrain::cpu {
namespace {

// The f32 value of one stored W element rounded to the compute type.
struct AsIs {
    float operator()(float v) const { return v; }
};
struct RoundBf16 {
    float operator()(float v) const { return round_bf16(v); }
};
struct WidenBf16 {
    float operator()(uint16_t h) const { return bf16_value(h); }
};

// Eight consecutive floats in one AVX register (GCC vector extension): two of them are the
// kLanes = 16 lanes of cpu_simd.h, lane l of the pair holding the elements i with i % 16 == l.
using V8 = float __attribute__((vector_size(32)));
static_assert(kLanes == 16, "two V8 per lane set");

inline V8 load8(const float* p) {
    V8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <typename Wt, typename Load>
inline V8 load8(const Wt* p, Load load) {
    float t[8];
    for (int l = 0; l < 8; ++l) t[l] = load(p[l]);
    return load8(t);
}

// c[j] for the J rows j0 <= j < j0 + J of W: x is the row of A (already in the compute type),
// W rows at w (row stride ldw, stored type Wt, load() gives the compute-type value). The sum
// of row j is kept in the lanes (lo, hi) and folded pairwise as lane_sum does; J > 1 only
// gives the core more independent sums to work on.
template <int J, typename Wt, typename Load>
void rows_dot(int64_t j0, int64_t k, float alpha, const float* x, const Wt* w, int64_t ldw,
              float beta, float* c, Load load) {
    const int64_t k16 = k / kLanes * kLanes;
    V8 lo[J] = {}, hi[J] = {};
    for (int64_t i = 0; i < k16; i += kLanes) {
        const V8 x0 = load8(x + i), x1 = load8(x + i + 8);
        for (int q = 0; q < J; ++q) {
            const Wt* wq = w + (j0 + q) * ldw + i;
            lo[q] += x0 * load8(wq, load);
            hi[q] += x1 * load8(wq + 8, load);
        }
    }
    for (int q = 0; q < J; ++q) {
        const Wt* wq = w + (j0 + q) * ldw;
        float acc[kLanes];
        std::memcpy(acc, &lo[q], sizeof(V8));
        std::memcpy(acc + 8, &hi[q], sizeof(V8));
        for (int l = 0; k16 + l < k; ++l) acc[l] += x[k16 + l] * load(wq[k16 + l]);
        for (int width = kLanes / 2; width > 0; width /= 2)
            for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
        float& out = c[j0 + q];
        out = beta == 0.0f ? alpha * acc[0] : alpha * acc[0] + beta * out;
    }
}

// The whole product in one parallel region: the n rows of W in one contiguous block per
// thread, 4 rows at a time.
template <typename Wt, typename Load>
void run(const GemmArgs& g, const float* x, const Wt* w, int64_t ldw, float* c, Load load) {
    const int64_t n = g.n, k = g.k;
#pragma omp parallel if (n * k > kParallelMin)
    {
#if defined(_OPENMP)
        const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
#else
        const int64_t threads = 1, t = 0;
#endif
        const int64_t j1 = n * (t + 1) / threads;
        int64_t j = n * t / threads;
        for (; j + 4 <= j1; j += 4) rows_dot<4>(j, k, g.alpha, x, w, ldw, g.beta, c, load);
        for (; j < j1; ++j) rows_dot<1>(j, k, g.alpha, x, w, ldw, g.beta, c, load);
    }
}

// The row of A rounded to bf16 into buf.
void round_a(const GemmArgs& g, const StoredMatrix& a, float* buf) {
    if (a.dtype == DType::f32) {
        const float* src = static_cast<const float*>(a.data);
        for (int64_t i = 0; i < g.k; ++i) buf[i] = round_bf16(src[i]);
    } else {
        const uint16_t* src = static_cast<const uint16_t*>(a.data);
        for (int64_t i = 0; i < g.k; ++i) buf[i] = bf16_value(src[i]);
    }
}

}  // namespace

bool gemv_applies(const GemmArgs& g) {
    return g.batch == 1 && g.m == 1 && g.k >= 1 && g.ta == Trans::N && g.tb == Trans::T &&
           g.compute != DType::f16;
}

void gemv(const GemmArgs& g, const StoredMatrix& a, const StoredMatrix& w, float* c, float* a_buf) {
    if (g.compute == DType::f32)
        return run(g, static_cast<const float*>(a.data), static_cast<const float*>(w.data), w.ld,
                   c, AsIs{});
    round_a(g, a, a_buf);
    if (w.dtype == DType::f32)
        return run(g, a_buf, static_cast<const float*>(w.data), w.ld, c, RoundBf16{});
    run(g, a_buf, static_cast<const uint16_t*>(w.data), w.ld, c, WidenBf16{});
}

}  // namespace moetrain::cpu
