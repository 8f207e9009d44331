// GEMM and copy probes through the Device interface (device_probe.h).
#include "device_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>

namespace moetrain::cli {
namespace {

// Sizes per backend: large enough to leave the caches and to amortise a launch on a GPU,
// small enough that the probe takes well under a second on a two-core CPU or on PoCL.
struct ProbeSizes {
    int64_t gemm_n, copy_floats;
    int reps;  // operations per timed batch
};

ProbeSizes sizes_for(const Device& device) {
    const std::string b = device.backend_name();
    if (b == "cuda") return {4096, int64_t{64} << 20, 10};  // 4096^3; 256 MiB per buffer
    if (b == "cpu") return {1024, int64_t{32} << 20, 3};    // 1024^3; 128 MiB per buffer
    return {512, int64_t{8} << 20, 3};                      // opencl and others
}

// The best rate over three timed batches of `reps` calls of `op` (after one untimed call).
double best_rate(Device& device, int reps, double units_per_call, const std::function<void()>& op) {
    using Clock = std::chrono::steady_clock;
    op();
    device.synchronize();
    double best = 0;
    for (int batch = 0; batch < 3; ++batch) {
        const auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i) op();
        device.synchronize();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (s > 0) best = std::max(best, units_per_call * reps / s);
    }
    return best;
}

// An n x n operand in `dtype`, every element 1 (converted from f32 when 16-bit).
Tensor ones(Device& device, DType dtype, int64_t n) {
    Tensor f = device.alloc(DType::f32, Shape{n, n});
    device.fill(f, 1.0f);
    if (dtype == DType::f32) return f;
    Tensor t = device.alloc(dtype, Shape{n, n});
    device.convert(t, f);
    return t;
}

}  // namespace

ProbeResult probe_gemm(Device& device, DType compute) {
    const ProbeSizes s = sizes_for(device);
    const int64_t n = s.gemm_n;
    GemmArgs g = dense_gemm(Trans::N, Trans::N, n, n, n, ones(device, compute, n),
                            ones(device, compute, n), device.alloc(DType::f32, Shape{n, n}));
    g.compute = compute;
    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * n;
    const double rate = best_rate(device, s.reps, flops / 1e9, [&] { device.gemm(g); });
    return {rate, std::to_string(n) + "^3 " + dtype_name(compute) + " GEMM probe"};
}

ProbeResult probe_copy(Device& device) {
    const ProbeSizes s = sizes_for(device);
    const Tensor src = device.alloc(DType::f32, Shape{s.copy_floats});
    const Tensor dst = device.alloc(DType::f32, Shape{s.copy_floats});
    device.fill(src, 1.0f);
    const double bytes = 2.0 * static_cast<double>(src.bytes());  // read + write
    const double rate = best_rate(device, s.reps, bytes / 1e9, [&] { device.copy(dst, src); });
    return {rate, std::to_string(src.bytes() >> 20) + " MiB copy probe"};
}

}  // namespace moetrain::cli
