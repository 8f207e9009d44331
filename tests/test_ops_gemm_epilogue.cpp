// Op tests, gemm_epilogue (a product with a bias and / or GELU, or the GELU gradient, applied
// before it is stored): on every device against the float64 reference of gemm, add_bias and
// act_fwd / act_bwd(gelu) in turn, for every transpose pair, with and without bias, each
// activation part, beta != 0 without one, and shapes where
// cuda's cuBLASLt path runs and where it must fall back (the GELU input's leading dimension n
// not a multiple of 8) — the fallback named by gemm_epilogue_kernel, never silent. Then the
// argument checks of the front door. Tolerance as the gemm tests (f32 products).
#include <cmath>

#include "moetrain/profiling.h"
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
std::string expected_kernel(const Device& dev, int64_t n, EpilogueAct act) {
    if (dev.backend_name() != "cuda" && dev.backend_name() != "cudasim") return "";
    return act != EpilogueAct::none && n % 8 != 0 ? "unfused" : "cublaslt";
}

void run_case(Device& dev, Trans ta, Trans tb, const EpilogueCase& c, bool bias, EpilogueAct act,
              uint64_t seed) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(static_cast<int>(ta));
    CAPTURE(static_cast<int>(tb));
    CAPTURE(bias);
    CAPTURE(static_cast<int>(act));
    const float beta = act != EpilogueAct::none ? 0.0f : 0.5f;
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
    e.act = act;
    if (act != EpilogueAct::none) e.pre_act = to_device(dev, pre0);
    CHECK(dev.gemm_epilogue_kernel(g, e) == expected_kernel(dev, c.n, act));
    dev.gemm_epilogue(g, e);

    ref::Vec pre = c0;
    ref::gemm(ref::gemm_dims(g), a, b, pre);
    if (bias) ref::add_bias(pre, bv, c.m, c.n);
    ref::Vec want = pre;
    if (act == EpilogueAct::gelu) ref::act_fwd(Act::gelu, want, pre, c.m * c.n);
    if (act == EpilogueAct::gelu_grad) ref::act_bwd(Act::gelu, want, pre, pre0, c.m * c.n);
    const Tol tol{1e-4, 2e-5 * std::sqrt(static_cast<double>(c.k) + 1)};
    check_close(from_device(dev, g.c), want, tol, "gemm_epilogue C");
    // gelu writes the pre-activation; gelu_grad only reads it.
    if (act == EpilogueAct::gelu) check_close(from_device(dev, e.pre_act), pre, tol, "pre_act");
    if (act == EpilogueAct::gelu_grad)
        check_close(from_device(dev, e.pre_act), pre0, Tol{0, 0}, "pre_act kept");
}

}  // namespace

TEST_CASE("ops: gemm_epilogue bias, gelu, gelu_grad, every transpose, cuBLASLt and fallback") {
    // n = 8, 16, 24, 40: cuBLASLt on cuda; n = 12, 5 with GELU: the unfused fallback.
    const EpilogueCase cases[] = {{1, 8, 3},  {7, 16, 5}, {33, 24, 65},
                                  {5, 12, 7}, {9, 5, 4},  {64, 40, 17}};
    for_each_test_device([&](Device& dev) {
        uint64_t seed = 1;
        for (Trans ta : {Trans::N, Trans::T})
            for (Trans tb : {Trans::N, Trans::T})
                for (const auto& c : cases)
                    for (EpilogueAct act :
                         {EpilogueAct::none, EpilogueAct::gelu, EpilogueAct::gelu_grad})
                        for (bool bias : {false, true})
                            if (!bias || act != EpilogueAct::gelu_grad)
                                run_case(dev, ta, tb, c, bias, act, seed++);
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
            const GemmEpilogue e{
                .bias = to_device(dev, bv), .act = EpilogueAct::gelu, .pre_act = zeros(dev, m * n)};
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
        const GemmEpilogue gelu{
            .bias = zeros(dev, n), .act = EpilogueAct::gelu, .pre_act = zeros(dev, m * n)};
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
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(good(), GemmEpilogue{.act = EpilogueAct::gelu}),
                             doctest::Contains("pre_act"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(good(), GemmEpilogue{.pre_act = zeros(dev, m * n)}),
                             doctest::Contains("without gelu"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(good(), GemmEpilogue{.bias = zeros(dev, n - 1)}),
                             doctest::Contains("bias"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(good(), GemmEpilogue{.bias = zeros(dev, n),
                                                                    .act = EpilogueAct::gelu_grad,
                                                                    .pre_act = zeros(dev, m * n)}),
                             doctest::Contains("bias with gelu_grad"), Error);
        g = good();
        const Tensor both = zeros(dev, 2 * m * n);
        g.c = both.view(0, {m * n});
        CHECK_THROWS_WITH_AS(
            dev.gemm_epilogue(g, GemmEpilogue{.act = EpilogueAct::gelu,
                                              .pre_act = both.view(m * n - 1, {m * n})}),
            doctest::Contains("overlaps"), Error);
        dev.gemm_epilogue(
            g, GemmEpilogue{.act = EpilogueAct::gelu, .pre_act = both.view(m * n, {m * n})});
    });
}

TEST_CASE("ops: gemm_epilogue is booked under the way it ran (--profile)") {
    for_each_test_device([&](Device& dev) {
        ProfilingDevice prof(dev);
        for (int64_t n : {16, 12}) {  // cuBLASLt on cuda, then the fallback
            CAPTURE(n);
            prof.reset();
            const int64_t m = 3, k = 4;
            const GemmArgs g = dense_gemm(Trans::N, Trans::N, m, n, k, zeros(dev, m * k),
                                          zeros(dev, k * n), zeros(dev, m * n));
            prof.gemm_epilogue(
                g, GemmEpilogue{.act = EpilogueAct::gelu, .pre_act = zeros(dev, m * n)});
            const std::string kernel = expected_kernel(dev, n, EpilogueAct::gelu);
            const auto table = prof.table();
            REQUIRE(table.size() == 1);
            CHECK(table[0].op ==
                  (kernel.empty() ? "gemm_epilogue" : "gemm_epilogue[" + kernel + "]"));
            CHECK(table[0].flops == doctest::Approx(2.0 * m * n * k + 10.0 * m * n));
        }
    });
}
