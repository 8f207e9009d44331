// The profiling device's cost of an op (backends/profiling/profiling_device.cpp): the op's
// formula when it has one (gemm: 2mnk FLOPs; attention: the causal products; add_counts), the
// default otherwise (no FLOPs, the bytes of every tensor view the op is given), booked per op
// name with its call count, on every device.
#include "moetrain/profiling.h"
#include "op_test_util.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {
const OpProfile& booked(const ProfilingDevice& prof, const std::string& op) {
    static std::vector<OpProfile> table;
    table = prof.table();
    for (const OpProfile& p : table)
        if (p.op == op) return p;
    FAIL("the profiling device booked no '" << op << "'");
    return table.front();
}
}  // namespace

TEST_CASE("profiling: ops with a formula use it, the others the bytes of their tensor views") {
    for_each_test_device([&](Device& dev) {
        ProfilingDevice prof(dev);
        // Formulas.
        const int64_t m = 3, n = 5, k = 7;
        prof.gemm(dense_gemm(Trans::N, Trans::N, m, n, k, zeros(dev, m * k), zeros(dev, k * n),
                             zeros(dev, m * n)));
        CHECK(booked(prof, "gemm").flops == doctest::Approx(2.0 * m * n * k));
        CHECK(booked(prof, "gemm").bytes == doctest::Approx(4.0 * (m * k + k * n + m * n)));
        Tensor acc = zeros(dev, 6, DType::i32), counts = zeros(dev, 6, DType::i32);
        prof.add_counts(acc, counts, 6);
        CHECK(booked(prof, "add_counts").flops == doctest::Approx(6.0));
        CHECK(booked(prof, "add_counts").bytes == doctest::Approx(3 * 4.0 * 6));
        // The default: a 10-element f32 view and a 12-element i32 view, no FLOPs.
        Tensor f = zeros(dev, 10), i = zeros(dev, 12, DType::i32);
        prof.fill(f, 2.0f);
        prof.fill(i, 1.0f);
        CHECK(booked(prof, "fill").calls == 2);
        CHECK(booked(prof, "fill").flops == 0.0);
        CHECK(booked(prof, "fill").bytes == doctest::Approx(4.0 * 10 + 4.0 * 12));
        std::vector<float> host(10, 1.0f);
        prof.upload(f.view(2, {4}), host.data());  // a view of 4 elements of the 10
        CHECK(booked(prof, "upload").bytes == doctest::Approx(4.0 * 4));
        Tensor a = zeros(dev, 8), b = zeros(dev, 8);
        prof.convert(a, b);
        CHECK(booked(prof, "convert").bytes == doctest::Approx(2 * 4.0 * 8));
    });
}
