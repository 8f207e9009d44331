// Op tests, gemm_epilogue (a product with a bias and / or GELU applied before it is stored): on
// every device against the float64 reference of gemm, add_bias and act_fwd(gelu) in turn, for
// every transpose pair, with and without bias and GELU, beta != 0 without GELU, and shapes where
// cuda's cuBLASLt path runs and where it must fall back (the GELU input's leading dimension n
// not a multiple of 8) — the fallback named by gemm_epilogue_kernel, never silent. Then the
// argument checks of the front door. Tolerance as the gemm tests (f32 products).
#include <cmath>

#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {

struct EpilogueCase {
    int64_t m, n, k;
};

// What gemm_epilogue_kernel must say for (n, gelu): cuda(sim) runs cuBLASLt unless GELU's input
// cannot be stored with ld n; the other backends have one way only.
std::string expected_kernel(const Device& dev, int64_t n, bool gelu) {
    if (dev.backend_name() != "cuda" && dev.backend_name() != "cudasim") return "";
    return gelu && n % 8 != 0 ? "unfused" : "cublaslt";
}

void run_case(Device& dev, Trans ta, Trans tb, const EpilogueCase& c, bool bias, bool gelu,
              uint64_t seed) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(static_cast<int>(ta));
    CAPTURE(static_cast<int>(tb));
    CAPTURE(bias);
    CAPTURE(gelu);
    const float beta = gelu ? 0.0f : 0.5f;
    GemmArgs g = dense_gemm(ta, tb, c.m, c.n, c.k);
    g.alpha = 0.75f;
    g.beta = beta;
    Rng rng(seed);
    auto a = rng.normal(c.m * c.k), b = rng.normal(c.k * c.n), c0 = rng.normal(c.m * c.n);
    auto bv = rng.normal(c.n), pre0 = rng.normal(c.m * c.n);
    g.a = to_device(dev, a);
    g.b = to_device(dev, b);
    g.c = to_device(dev, c0);
    GemmEpilogue e;
    if (bias) e.bias = to_device(dev, bv);
    e.gelu = gelu;
    if (gelu) e.pre_act = to_device(dev, pre0);
    CHECK(dev.gemm_epilogue_kernel(g, e) == expected_kernel(dev, c.n, gelu));
    dev.gemm_epilogue(g, e);

    ref::Vec pre = c0;
    ref::gemm(ref::gemm_dims(g), a, b, pre);
    if (bias) ref::add_bias(pre, bv, c.m, c.n);
    ref::Vec want = pre;
    if (gelu) ref::act_fwd(Act::gelu, want, pre, c.m * c.n);
    const Tol tol{1e-4, 2e-5 * std::sqrt(static_cast<double>(c.k) + 1)};
    check_close(from_device(dev, g.c), want, tol, "gemm_epilogue C");
    if (gelu) check_close(from_device(dev, e.pre_act), pre, tol, "gemm_epilogue pre_act");
}

}  // namespace

TEST_CASE("ops: gemm_epilogue bias and gelu, every transpose, cuBLASLt and its fallback") {
    // n = 8, 16, 24, 40: cuBLASLt on cuda; n = 12, 5 with GELU: the unfused fallback.
    const EpilogueCase cases[] = {{1, 8, 3}, {7, 16, 5}, {33, 24, 65}, {5, 12, 7}, {9, 5, 4},
                                  {64, 40, 17}};
    for_each_test_device([&](Device& dev) {
        uint64_t seed = 1;
        for (Trans ta : {Trans::N, Trans::T})
            for (Trans tb : {Trans::N, Trans::T})
                for (const auto& c : cases)
                    for (bool bias : {false, true})
                        for (bool gelu : {false, true})
                            run_case(dev, ta, tb, c, bias, gelu, seed++);
    });
}

TEST_CASE("ops: gemm_epilogue with 16-bit products equals gemm, add_bias and act_fwd") {
    // bf16 / f16 compute with f32 operands (converted by the backend, as the model's activations
    // are): the same rounded operands as the unfused ops, so only the fp32 summation order of
    // the product may differ.
    for_each_test_device([&](Device& dev) {
        for (DType compute : {DType::bf16, DType::f16}) {
            CAPTURE(dtype_name(compute));
            const int64_t m = 19, n = 24, k = 40;
            Rng rng(7);
            auto a = rng.normal(m * k), b = rng.normal(n * k), bv = rng.normal(n);
            GemmArgs g = dense_gemm(Trans::N, Trans::T, m, n, k, to_device(dev, a),
                                    to_device(dev, b), zeros(dev, m * n));
            g.compute = compute;
            const GemmEpilogue e{.bias = to_device(dev, bv), .gelu = true,
                                 .pre_act = zeros(dev, m * n)};
            dev.gemm_epilogue(g, e);
            GemmArgs u = g;
            u.c = zeros(dev, m * n);
            const Tensor h = zeros(dev, m * n);
            dev.gemm(u);
            dev.add_bias(u.c, e.bias, m, n);
            dev.act_fwd(Act::gelu, h, u.c, m * n);
            const Tol tol{1e-5, 2e-6 * std::sqrt(static_cast<double>(k) + 1)};
            check_close(from_device(dev, e.pre_act), from_device(dev, u.c), tol, "pre_act");
            check_close(from_device(dev, g.c), from_device(dev, h), tol, "C");
        }
    });
}

TEST_CASE("ops: gemm_epilogue rejects what it cannot apply") {
    for_each_test_device([&](Device& dev) {
        const int64_t m = 4, n = 8, k = 3;
        auto good = [&] {
            GemmArgs g = dense_gemm(Trans::N, Trans::N, m, n, k, zeros(dev, m * k),
                                    zeros(dev, k * n), zeros(dev, m * n));
            return g;
        };
        const GemmEpilogue gelu{.bias = zeros(dev, n), .gelu = true, .pre_act = zeros(dev, m * n)};
        dev.gemm_epilogue(good(), gelu);  // the valid call the others differ from

        GemmArgs g = good();
        g.batch = 2;
        g.stride_a = m * k;
        g.stride_b = k * n;
        g.stride_c = m * n;
        g.a = zeros(dev, 2 * m * k);
        g.b = zeros(dev, 2 * k * n);
        g.c = zeros(dev, 2 * m * n);
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, gelu), doctest::Contains("batch 2"), Error);
        g = good();
        g.ldc = n + 1;
        g.c = zeros(dev, m * (n + 1));
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, {}), doctest::Contains("must be dense"), Error);
        g = good();
        g.beta = 1.0f;
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, gelu), doctest::Contains("with gelu"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(good(), GemmEpilogue{.gelu = true}),
                             doctest::Contains("pre_act"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(good(), GemmEpilogue{.pre_act = zeros(dev, m * n)}),
                             doctest::Contains("without gelu"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(good(), GemmEpilogue{.bias = zeros(dev, n - 1)}),
                             doctest::Contains("bias"), Error);
        g = good();
        const Tensor both = zeros(dev, 2 * m * n);
        g.c = both.view(0, {m * n});
        CHECK_THROWS_WITH_AS(
            dev.gemm_epilogue(g, GemmEpilogue{.gelu = true, .pre_act = both.view(m * n - 1, {m * n})}),
            doctest::Contains("overlaps"), Error);
        dev.gemm_epilogue(g, GemmEpilogue{.gelu = true, .pre_act = both.view(m * n, {m * n})});
    });
}
