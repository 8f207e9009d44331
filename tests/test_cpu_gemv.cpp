// CPU gemm one-row bf16 path (backends/cpu/cpu_gemv.cpp: m = 1, ta = N, tb = T, batch 1,
// compute bf16, a bf16 model's linear layers at decoding): A and W stored f32 or bf16, n and k
// awkward (k below, at and not a multiple of the 16 SIMD lanes; long enough to run on every
// thread), alpha / beta, padded leading dimensions, beta = 0 over a C full of NaN (C must not
// be read), and the same bits for 1 and 3 threads. The neighbours that keep the library path
// get the same checks: f32 and f16 compute, m = 2..5, tb = N, ta = T, batch 2. Against the
// float64 reference of the rounded operands: f32 tolerance as in test_ops_dense.cpp, 16-bit as
// in test_ops_gemm16.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "moetrain/dtype.h"
#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {

struct Shape2 {
    int64_t m, n, k, pad;
    float alpha, beta;
};

struct Stored {
    DType compute = DType::f32, a = DType::f32, w = DType::f32;
    Trans ta = Trans::N, tb = Trans::T;
    int64_t batch = 1;
};

// Runs one product (C starts as NaN when nan_c) and returns C; `want` gets the reference.
std::vector<double> run(Device& dev, const Stored& s, const Shape2& c, uint64_t seed, bool nan_c,
                        std::vector<double>& want) {
    GemmArgs g = padded_gemm(s.ta, s.tb, c.m, c.n, c.k, c.alpha, c.beta, c.pad, s.batch);
    g.compute = s.compute;
    Rng rng(seed);
    auto a = rng.normal(g.stride_a * s.batch), b = rng.normal(g.stride_b * s.batch);
    auto cc = rng.normal(g.stride_c * s.batch);
    want = cc;
    if (nan_c)
        for (int64_t i = 0; i < s.batch; ++i)
            for (int64_t r = 0; r < c.m; ++r)
                std::fill_n(cc.begin() + i * g.stride_c + r * g.ldc, c.n,
                            std::numeric_limits<double>::quiet_NaN());
    g.a = to_device_as(dev, a, s.a);
    g.b = to_device_as(dev, b, s.w);
    g.c = to_device(dev, cc);
    dev.gemm(g);
    ref::gemm(ref::gemm_dims(g), ref::rounded(a, s.compute), ref::rounded(b, s.compute), want);
    return from_device(dev, g.c);
}

void check(Device& dev, const Stored& s, const Shape2& c, uint64_t seed, bool nan_c = false) {
    const std::string dtypes =
        std::string(dtype_name(s.compute)) + " A " + dtype_name(s.a) + " W " + dtype_name(s.w);
    CAPTURE(dtypes);
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(c.pad);
    CAPTURE(c.beta);
    CAPTURE(nan_c);
    std::vector<double> want;
    const auto got = run(dev, s, c, seed, nan_c, want);
    const double per_term = s.compute == DType::f32 ? 2e-5 : 2e-6;
    const double rel = s.compute == DType::f32 ? 1e-4 : 1e-5;
    check_close(got, want, Tol{rel, per_term * std::sqrt(static_cast<double>(c.k) + 1)}, "gemv");
}

// k: 1, below / at / above the 16 lanes, and 1000 x 300 (enough work for every thread); the
// m > 1 rows take the library path.
const Shape2 kShapes[] = {
    {1, 1, 1, 0, 1.0f, 0.0f},     {1, 37, 15, 3, 0.5f, 0.0f},    {1, 9, 16, 0, 1.0f, 1.0f},
    {1, 33, 17, 1, -1.0f, 0.25f}, {1, 66, 130, 2, 1.0f, 0.0f},   {1, 1000, 300, 0, 1.0f, 0.5f},
    {1, 999, 301, 5, 0.5f, 0.0f}, {1, 1001, 257, 0, 1.0f, 1.0f}, {1, 1003, 300, 7, 2.0f, -0.5f},
    {2, 999, 301, 5, 0.5f, 0.0f}, {3, 33, 17, 1, -1.0f, 0.25f},  {4, 1000, 300, 7, 2.0f, -0.5f},
};

int default_threads() {
    if (const char* env = std::getenv("OMP_NUM_THREADS")) return std::max(1, std::atoi(env));
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

TEST_CASE(
    "cpu: gemm one-row path (m = 1, W^T, bf16), A and W f32 or bf16, awkward n / k, ld, alpha "
    "beta") {
    auto dev = open_device("cpu");
    uint64_t seed = 700;
    for (DType a : {DType::f32, DType::bf16})
        for (DType w : {DType::f32, DType::bf16})
            for (const Shape2& c : kShapes) {
                check(*dev, {DType::bf16, a, w}, c, seed++);
                if (c.beta == 0.0f)
                    check(*dev, {DType::bf16, a, w}, c, seed++, true);  // C is not read
            }
}

TEST_CASE("cpu: gemm at the one-row shapes in f32 and f16 (library path)") {
    auto dev = open_device("cpu");
    uint64_t seed = 800;
    for (const Shape2& c : kShapes) check(*dev, {}, c, seed++, c.beta == 0.0f);
    for (DType a : {DType::f32, DType::f16})
        for (DType w : {DType::f32, DType::f16})
            for (const Shape2& c : kShapes)
                check(*dev, {DType::f16, a, w}, c, seed++, c.beta == 0.0f);
}

TEST_CASE("cpu: gemm next to the one-row path (m = 5, tb = N, ta = T, batch 2) stays exact") {
    auto dev = open_device("cpu");
    const Shape2 c{1, 70, 33, 2, 0.5f, 0.25f};
    for (DType compute : {DType::f32, DType::bf16}) {
        check(*dev, {compute}, {5, 70, 33, 2, 0.5f, 0.25f}, 900);
        check(*dev, {compute, DType::f32, DType::f32, Trans::N, Trans::N}, c, 901);
        check(*dev, {compute, DType::f32, DType::f32, Trans::T, Trans::T}, c, 902);
        check(*dev, {compute, DType::f32, DType::f32, Trans::N, Trans::T, 2}, c, 903);
    }
}

TEST_CASE("cpu: gemm one-row path gives the same bits with 1 and 3 threads") {
    std::vector<double> results[2], want;
    int i = 0;
    for (int threads : {1, 3}) {
        DeviceOptions opts;
        opts.threads = threads;
        auto dev = open_device("cpu", opts);
        for (const Shape2& c : kShapes) {
            auto got = run(*dev, {DType::bf16, DType::f32, DType::bf16}, c,
                           1000 + static_cast<uint64_t>(c.n), false, want);
            results[i].insert(results[i].end(), got.begin(), got.end());
        }
        ++i;
    }
    DeviceOptions restore;
    restore.threads = default_threads();  // the process-wide OpenMP setting of the other tests
    open_device("cpu", restore);
    check_close(results[1], results[0], Tol{0, 0}, "3 threads vs 1 thread");
}
