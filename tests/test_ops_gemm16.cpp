// Op tests, 16-bit matrix products (GemmArgs::compute = bf16 / f16) on every device: operands
// stored as f32 or as the compute type in every combination, every transpose pair, padded
// leading dimensions, alpha / beta, strided and shared (stride 0) batches, awkward sizes, k = 0,
// C not read when beta = 0, and the dtype combinations the contract rejects.
// Reference: the operands rounded to `compute` with dtype.h, then float64 products. Only the
// summation order (and fp32 rounding of the sums) may differ, so the tolerance is tight
// (rel 1e-5, abs 2e-6 * sqrt(k + 1)): a backend that multiplies unrounded f32 operands is off
// by ~1e-3 * sqrt(k) (bf16) or ~1e-4 * sqrt(k) (f16) and fails every case; "rounds the operands"
// checks that on values built so that rounding moves the result by whole units.
// Also: the branch-free conversions of backends/cpu/cpu_round16.h against dtype.h.
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_gemm.h"
#include "cpu/cpu_round16.h"
#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {

struct Case {
    int64_t m, n, k, batch, pad;
    float alpha, beta;
    bool shared_b = false;  // stride_b = 0: one B for every batch entry
};

struct Layout {
    DType compute, a_dtype, b_dtype;
    Trans ta, tb;
};

// Runs one product on dev and checks the whole C buffer (gaps included) against the reference.
void run_case(Device& dev, const Layout& l, const Case& c, uint64_t seed) {
    const std::string dtypes = std::string(dtype_name(l.compute)) + " A " + dtype_name(l.a_dtype) +
                               " B " + dtype_name(l.b_dtype);
    CAPTURE(dtypes);
    CAPTURE(static_cast<int>(l.ta));
    CAPTURE(static_cast<int>(l.tb));
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(c.batch);
    // Gaps of 5, 3 and 1 elements between the batch entries (or one B shared by all).
    GemmArgs g = padded_gemm(l.ta, l.tb, c.m, c.n, c.k, c.alpha, c.beta, c.pad, c.batch, 5, 3, 1);
    g.compute = l.compute;
    const int64_t b_entry = g.stride_b - 3;  // elements of one B entry
    if (c.shared_b) g.stride_b = 0;
    Rng rng(seed);
    auto a = rng.normal(g.stride_a * c.batch),
         b = rng.normal(std::max<int64_t>(g.stride_b, b_entry) * c.batch);
    auto cc = rng.normal(g.stride_c * c.batch);
    g.a = to_device_as(dev, a, l.a_dtype);
    g.b = to_device_as(dev, b, l.b_dtype);
    g.c = to_device(dev, cc);
    dev.gemm(g);
    auto want = cc;  // elements outside the m x n products keep what was uploaded
    ref::gemm(ref::gemm_dims(g), ref::rounded(a, l.compute), ref::rounded(b, l.compute), want);
    check_close(from_device(dev, g.c), want,
                Tol{1e-5, 2e-6 * std::sqrt(static_cast<double>(c.k) + 1)}, "gemm16");
}

const Case kCases[] = {
    {1, 1, 1, 1, 0, 1.0f, 0.0f},     {7, 5, 33, 1, 3, 1.0f, 0.0f},
    {33, 17, 130, 1, 0, 0.5f, 0.7f}, {1, 100, 7, 3, 2, -1.0f, 0.0f},
    {31, 63, 17, 3, 0, 1.0f, 0.25f}, {9, 6, 65, 4, 1, 1.0f, 1.0f, true},
    {5, 4, 0, 2, 1, 1.0f, 0.5f},
};

void run_all_on(Device& dev, DType compute) {
    const DType half = compute;
    uint64_t seed = 1;
    for (DType ad : {DType::f32, half})
        for (DType bd : {DType::f32, half})
            for (Trans ta : {Trans::N, Trans::T})
                for (Trans tb : {Trans::N, Trans::T})
                    for (const Case& c : kCases)
                        run_case(dev, {compute, ad, bd, ta, tb}, c, seed++);
}

void run_all(DType compute) {
    for_each_test_device([&](Device& dev) { run_all_on(dev, compute); });
}

}  // namespace

TEST_CASE(
    "ops: gemm16 bf16 compute, f32 / bf16 operands, every transpose, ld, alpha beta, batched") {
    run_all(DType::bf16);
}

TEST_CASE("ops: gemm16 f16 compute, f32 / f16 operands, every transpose, ld, alpha beta, batched") {
    run_all(DType::f16);
}

// The long-reduction weight-gradient shape (Trans::T x Trans::N, k >= 1024, which the CPU runs
// through oneDNN's matmul primitive), many rows (the CPU's bf16 path cuts m = 600 into 512 +
// 64 + 16 + 8 rows and pads k = 70 to 128 when it packs both operands), and beta = 0 over a C
// full of NaN (C must not be read).
namespace {
void long_reduction_on(Device& dev, DType compute) {
    run_case(dev, {compute, DType::f32, compute, Trans::T, Trans::N},
             {40, 8, 1100, 1, 1, 1.0f, 0.5f}, 7);
    for (Trans ta : {Trans::N, Trans::T})
        for (Trans tb : {Trans::N, Trans::T}) {
            run_case(dev, {compute, DType::f32, DType::f32, ta, tb},
                     {600, 9, 70, 2, 3, 0.5f, 0.25f}, 11);
            run_case(dev, {compute, compute, DType::f32, ta, tb}, {600, 5, 33, 1, 0, 1.0f, 0.0f},
                     12);
        }
    GemmArgs g = padded_gemm(Trans::N, Trans::N, 13, 11, 20, 1.0f, 0.0f, 0, 1);
    g.compute = compute;
    Rng rng(9);
    auto a = rng.normal(g.m * g.k), b = rng.normal(g.k * g.n);
    g.a = to_device_as(dev, a, compute);
    g.b = to_device(dev, b);
    g.c = to_device(dev, std::vector<double>(static_cast<size_t>(g.m * g.n),
                                             std::numeric_limits<double>::quiet_NaN()));
    dev.gemm(g);
    std::vector<double> want(static_cast<size_t>(g.m * g.n), 0.0);
    ref::gemm(ref::gemm_dims(g), ref::rounded(a, compute), ref::rounded(b, compute), want);
    check_close(from_device(dev, g.c), want, Tol{1e-5, 1e-5}, "gemm16 beta = 0 over NaN");
}
}  // namespace

TEST_CASE("ops: gemm16 long reduction, many rows, beta = 0 over NaN") {
    for_each_test_device([&](Device& dev) {
        for (DType compute : {DType::bf16, DType::f16}) long_reduction_on(dev, compute);
    });
}

// Every element of A is p and of B is q, with p and q just above half an ulp of `compute` above
// 1 (round up) or exactly on the tie (round to even: down to 1). With k = 8 every partial sum
// of the rounded products is exact in f32, so C = k * round(p) * round(q) exactly (tolerance
// 0); unrounded operands move C by k * ulp / 64 or more (ulp = spacing of `compute` at 1).
namespace {
void rounding_on(Device& dev, DType compute) {
    const std::string compute_name = dtype_name(compute);
    CAPTURE(compute_name);
    const double ulp = compute == DType::bf16 ? 0x1p-7 : 0x1p-10;
    const double above = 1 + ulp / 2 + ulp / 64, tie = 1 + ulp / 2;
    for (auto [p, q] : {std::pair{above, tie}, {tie, above}, {above, above}}) {
        const int64_t m = 3, n = 5, k = 8;
        GemmArgs g = padded_gemm(Trans::N, Trans::N, m, n, k, 1.0f, 0.0f, 0, 1);
        g.compute = compute;
        g.a = to_device(dev, std::vector<double>(static_cast<size_t>(m * k), p));
        g.b = to_device(dev, std::vector<double>(static_cast<size_t>(k * n), q));
        g.c = zeros(dev, m * n);
        dev.gemm(g);
        const double rp = p == tie ? 1.0 : 1 + ulp, rq = q == tie ? 1.0 : 1 + ulp;
        CHECK(ref::round_to(p, compute) == rp);
        CHECK(ref::round_to(q, compute) == rq);
        check_close(from_device(dev, g.c),
                    std::vector<double>(static_cast<size_t>(m * n), k * rp * rq), Tol{0, 0},
                    "gemm16 of rounded operands");
    }
}
}  // namespace

TEST_CASE("ops: gemm16 rounds the operands to the compute type (ties to even)") {
    for_each_test_device([&](Device& dev) {
        for (DType compute : {DType::bf16, DType::f16}) rounding_on(dev, compute);
    });
}

// The CPU runs bf16 products through oneDNN's bf16 matmul where this processor has a kernel for
// it, else widened to f32 (cpu::bf16_gemm_path; AVX2-only CPUs). Both paths must keep the
// contract above, and the widened one is forced here so that it is tested on every machine; the
// oneDNN one runs too where the CPU has it. Forcing oneDNN where it has no kernel fails in one
// line.
TEST_CASE("cpu: bf16 products on both paths (oneDNN bf16 matmul, widened to f32)") {
    auto dev = open_device("cpu");
    const cpu::Bf16Gemm detected = cpu::bf16_gemm_path();
    struct Restore {
        cpu::Bf16Gemm path;
        ~Restore() { cpu::set_bf16_gemm_path(path); }
    } restore{detected};
    const bool onednn = cpu::onednn_bf16_available();
    MESSAGE("bf16 products on this CPU: " << cpu::bf16_gemm_description());
    std::vector<cpu::Bf16Gemm> paths{cpu::Bf16Gemm::widen};
    if (onednn) paths.push_back(cpu::Bf16Gemm::onednn);
    for (cpu::Bf16Gemm path : paths) {
        const std::string name = path == cpu::Bf16Gemm::widen ? "widen" : "onednn";
        CAPTURE(name);
        cpu::set_bf16_gemm_path(path);
        REQUIRE(cpu::bf16_gemm_path() == path);
        CHECK(cpu::bf16_gemm_description().find(
                  path == cpu::Bf16Gemm::widen ? "widened" : "oneDNN") != std::string::npos);
        run_all_on(*dev, DType::bf16);
        long_reduction_on(*dev, DType::bf16);
        rounding_on(*dev, DType::bf16);
    }
    if (!onednn)
        CHECK_THROWS_WITH_AS(cpu::set_bf16_gemm_path(cpu::Bf16Gemm::onednn),
                             doctest::Contains("oneDNN has no bf16 matmul kernel on this CPU"),
                             Error);
}

TEST_CASE("ops: gemm16 rejects dtype combinations outside the contract") {
    for_each_test_device([&](Device& dev) {
        auto args = [&](DType compute, DType a, DType b, DType c) {
            GemmArgs g;
            g.compute = compute;
            g.m = g.n = g.k = 4;
            g.lda = g.ldb = g.ldc = 4;
            g.a = dev.alloc(a, Shape{16});
            g.b = dev.alloc(b, Shape{16});
            g.c = dev.alloc(c, Shape{16});
            return g;
        };
        const DType f32 = DType::f32, bf16 = DType::bf16, f16 = DType::f16;
        CHECK_THROWS_WITH_AS(dev.gemm(args(f32, bf16, f32, f32)),
                             doctest::Contains("gemm: A is bf16 with compute f32"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm(args(f32, f32, f16, f32)),
                             doctest::Contains("gemm: B is f16 with compute f32"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm(args(bf16, f16, bf16, f32)),
                             doctest::Contains("gemm: A is f16 with compute bf16"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm(args(f16, f16, bf16, f32)),
                             doctest::Contains("gemm: B is bf16 with compute f16"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm(args(bf16, bf16, bf16, bf16)),
                             doctest::Contains("gemm: C is bf16, must be f32"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm(args(DType::i32, f32, f32, f32)),
                             doctest::Contains("gemm: compute dtype i32 is not f32, bf16 or f16"),
                             Error);
        CHECK_NOTHROW(dev.gemm(args(bf16, bf16, f32, f32)));
        CHECK_NOTHROW(dev.gemm(args(f16, f32, f16, f32)));
    });
}

// The CPU packing's branch-free conversions agree bit for bit with dtype.h: every f16 pattern,
// and f32 patterns from every exponent (random mantissas, ties, NaN, Inf, subnormals).
TEST_CASE("ops: gemm16 cpu branch-free conversions match dtype.h") {
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto bits = static_cast<uint16_t>(h);
        REQUIRE(std::bit_cast<uint32_t>(cpu::f16_value(bits)) ==
                std::bit_cast<uint32_t>(f16_to_f32(bits)));
        REQUIRE(std::bit_cast<uint32_t>(cpu::bf16_value(bits)) ==
                std::bit_cast<uint32_t>(bf16_to_f32(bits)));
    }
    Rng rng(5);
    auto mant = rng.ints(1 << 16, 0, (1 << 23) - 1);
    size_t i = 0;
    for (uint32_t sign : {0u, 0x80000000u})
        for (uint32_t exp = 0; exp < 256; ++exp)
            for (uint32_t low : {0u, 1u, 0xfffu, 0x1000u, 0x1fffu, 0x7fffu, 0x8000u, 0xffffu,
                                 0x7fffffu, 0x400000u}) {
                for (int r = 0; r < 64; ++r) {
                    const uint32_t m =
                        r == 0 ? low
                               : (static_cast<uint32_t>(mant[i++ % mant.size()]) & ~0xffffu) | low;
                    const uint32_t u = sign | (exp << 23) | (m & 0x7fffffu);
                    const float f = std::bit_cast<float>(u);
                    CAPTURE(u);
                    REQUIRE(cpu::bf16_bits(f) == f32_to_bf16(f));
                    REQUIRE(std::bit_cast<uint32_t>(cpu::round_f16(f)) ==
                            std::bit_cast<uint32_t>(f16_to_f32(f32_to_f16(f))));
                    REQUIRE(std::bit_cast<uint32_t>(cpu::round_bf16(f)) ==
                            std::bit_cast<uint32_t>(bf16_to_f32(f32_to_bf16(f))));
                }
            }
}
