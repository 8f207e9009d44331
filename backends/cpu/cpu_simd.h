// Reductions over one row / chunk that GCC reliably turns into SIMD code: the sum is split
// over a fixed number of lanes (element i goes to lane i % kLanes) that are folded pairwise at
// the end. The lane order is part of the source, not of the instruction set, so results are
// the same for the AVX2 and AVX-512 builds and for any thread count. (`#pragma omp simd
// reduction` leaves the order to the compiler and, inside lambdas, was left scalar by GCC 12.)
#pragma once

#include <cmath>
#include <cstdint>

namespace moetrain::cpu {

constexpr int kLanes = 16;

// Sum over i < n of f(i) (Acc = double or float).
template <typename Acc, typename F>
inline Acc lane_sum(int64_t n, F&& f) {
    Acc acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) acc[j] += f(i + j);
    for (int j = 0; i + j < n; ++j) acc[j] += f(i + j);
    for (int w = kLanes / 2; w > 0; w /= 2)
        for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    return acc[0];
}

// Largest of x[0..n) (NaN entries are skipped, -inf for n = 0).
inline float lane_max(const float* x, int64_t n) {
    float acc[kLanes];
    for (float& a : acc) a = -INFINITY;
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j)
            acc[j] = std::isgreater(x[i + j], acc[j]) ? x[i + j] : acc[j];
    for (int j = 0; i + j < n; ++j) acc[j] = std::isgreater(x[i + j], acc[j]) ? x[i + j] : acc[j];
    for (int w = kLanes / 2; w > 0; w /= 2)
        for (int j = 0; j < w; ++j)
            acc[j] = std::isgreater(acc[j + w], acc[j]) ? acc[j + w] : acc[j];
    return acc[0];
}

}  // namespace moetrain::cpu
