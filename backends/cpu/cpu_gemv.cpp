// The one-row bf16 product c = alpha * x W^T + beta * c of the CPU gemm (cpu_gemv.h): x is
// rounded to bf16 once per call, then each thread streams its contiguous block of W's rows
// once, widening (bf16) or rounding (f32) the elements on the fly. The dot products use the
// fixed lanes of cpu_simd.h (element i goes to lane i % kLanes, the lanes are folded
// pairwise), so c[j] does not depend on the thread count.
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

// The f32 value of one stored W element rounded to bf16.
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

// c[j] = alpha * dot(x, w_j) + beta * c[j] for one row w_j of W (stored type Wt, load() gives
// the bf16 value; x is already rounded to bf16). The sum is kept in the 16 lanes
// (lo, hi) and folded pairwise as lane_sum does.
template <typename Wt, typename Load>
void row_dot(int64_t k, float alpha, const float* x, const Wt* wj, float beta, float& out,
             Load load) {
    const int64_t k16 = k / kLanes * kLanes;
    V8 lo = {}, hi = {};
    for (int64_t i = 0; i < k16; i += kLanes) {
        lo += load8(x + i) * load8(wj + i, load);
        hi += load8(x + i + 8) * load8(wj + i + 8, load);
    }
    float acc[kLanes];
    std::memcpy(acc, &lo, sizeof lo);
    std::memcpy(acc + 8, &hi, sizeof hi);
    for (int l = 0; k16 + l < k; ++l) acc[l] += x[k16 + l] * load(wj[k16 + l]);
    for (int width = kLanes / 2; width > 0; width /= 2)
        for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
    out = beta == 0.0f ? alpha * acc[0] : alpha * acc[0] + beta * out;
}

// The whole product in one parallel region: the n rows of W in one contiguous block per
// thread, one row after the other (interleaving 4 rows measured slower on the whole decode
// step: more concurrent streams for the same bandwidth).
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
        for (int64_t j = n * t / threads, j1 = n * (t + 1) / threads; j < j1; ++j)
            row_dot(k, g.alpha, x, w + j * ldw, g.beta, c[j], load);
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
           g.compute == DType::bf16;
}

void gemv(const GemmArgs& g, const StoredMatrix& a, const StoredMatrix& w, float* c, float* a_buf) {
    round_a(g, a, a_buf);
    if (w.dtype == DType::f32)
        return run(g, a_buf, static_cast<const float*>(w.data), w.ld, c, RoundBf16{});
    run(g, a_buf, static_cast<const uint16_t*>(w.data), w.ld, c, WidenBf16{});
}

}  // namespace moetrain::cpu
