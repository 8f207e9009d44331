// Shared pieces of the op microbenchmarks: the CPU device (opened once, MOETRAIN_THREADS
// threads), device tensors of random values, and rate counters (GFLOP/s, GB/s).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/device.h"

namespace moetrain::bench {

inline Device& cpu() {
    static std::unique_ptr<Device> dev = [] {
        DeviceOptions o;
        if (const char* t = std::getenv("MOETRAIN_THREADS")) o.threads = std::atoi(t);
        return open_device("cpu", o);
    }();
    return *dev;
}

// n f32 values drawn from N(0, sd) (fixed seed), on the CPU device.
inline Tensor randn(int64_t n, float sd = 1.0f, uint32_t seed = 1) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sd);
    std::vector<float> h(static_cast<size_t>(n));
    for (auto& v : h) v = dist(rng);
    Tensor t = cpu().alloc(DType::f32, {n});
    cpu().upload(t, h.data());
    return t;
}

// n i32 values uniform in [0, hi).
inline Tensor randint(int64_t n, int32_t hi, uint32_t seed = 2) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(0, hi - 1);
    std::vector<int32_t> h(static_cast<size_t>(n));
    for (auto& v : h) v = dist(rng);
    Tensor t = cpu().alloc(DType::i32, {n});
    cpu().upload(t, h.data());
    return t;
}

// Per-iteration work as rates: GFLOP/s and GB/s columns.
inline void rates(benchmark::State& st, double flops, double bytes) {
    using benchmark::Counter;
    const double it = static_cast<double>(st.iterations());
    if (flops > 0) st.counters["GFLOP/s"] = Counter(flops * it / 1e9, Counter::kIsRate);
    if (bytes > 0) st.counters["GB/s"] = Counter(bytes * it / 1e9, Counter::kIsRate);
}

}  // namespace moetrain::bench
