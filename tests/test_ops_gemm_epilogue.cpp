// Op tests, gemm_epilogue (a product with a bias and / or GELU, or the GELU gradient, applied
// before it is stored): on every device against the float64 reference of gemm, add_bias and
// act_fwd / act_bwd(gelu) in turn, for every transpose pair, with and without bias, each
// activation part, beta != 0 without one, and shapes where
// cuda's cuBLASLt path runs and where it must fall back (the GELU input's leading dimension n
// not a multiple of 8) — the fallback named by gemm_epilogue_kernel, never silent; the bias
// gradient of a weight-gradient product. Then the argument checks of the front door. Tolerance as
// the gemm tests (f32 products).
#include <algorithm>
#include <cmath>
#include <map>

#include "moetrain/profiling.h"
#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {

struct EpilogueCase {
    int64_t m, n, k;
};

// What gemm_epilogue_kernel must say: cuda(sim) runs the GELU backward unfused, up to 4 rows
// against a B stored [n, k] on its skinny kernel (gemv), and cuBLASLt unless GELU's input cannot
// be stored with ld n; the other backends have one way only.
std::string expected_kernel(const Device& dev, const GemmArgs& g, EpilogueAct act) {
    if (dev.backend_name() != "cuda" && dev.backend_name() != "cudasim") return "";
    if (act == EpilogueAct::gelu_grad) return "unfused";
    if (g.m <= 4 && g.ta == Trans::N && g.tb == Trans::T) return "gemv";
    return act != EpilogueAct::none && g.n % 8 != 0 ? "unfused" : "cublaslt";
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
    CHECK(dev.gemm_epilogue_kernel(g, e) == expected_kernel(dev, g, act));
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
    // n = 8, 16, 24, 40: cuBLASLt on cuda; n = 12, 5 with GELU: the unfused fallback (gelu_grad:
    // always the unfused ops on cuda, CudaDevice::lt_fuses).
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

// A weight-gradient product dW [m, n] (+)= dy^T x with its bias gradient dbias [m] += the
// column sums of dy [k, m] (GemmEpilogue::dbias): cuda runs cuBLASLt's BGRADB, the others the
// gemm and bias_grad; beta 0 and 1, f32 and 16-bit products (cuBLASLt then sums the rounded dy),
// and k == 0 (no rows: C = beta C, dbias unchanged).
TEST_CASE("ops: gemm_epilogue dbias adds the bias gradient of a weight-gradient product") {
    struct DbiasCase {
        int64_t m, n, k;
        float beta;
        DType compute;
        bool a16 = false;
    };
    // a16: dy stored in the 16-bit compute type (the model's gradient rounded once for both
    // products, round_dy_once): every backend then sums the rounded dy.
    const DbiasCase cases[] = {
        {8, 16, 5, 0.0f, DType::f32},          {24, 12, 33, 1.0f, DType::f32},
        {1, 3, 64, 1.0f, DType::f32},          {5, 8, 0, 1.0f, DType::f32},
        {16, 24, 40, 1.0f, DType::bf16},       {9, 8, 17, 0.0f, DType::f16},
        {16, 24, 40, 1.0f, DType::bf16, true}, {9, 8, 17, 0.0f, DType::f16, true}};
    for_each_test_device([&](Device& dev) {
        uint64_t seed = 11;
        for (const auto& c : cases) {
            CAPTURE(c.m);
            CAPTURE(c.n);
            CAPTURE(c.k);
            CAPTURE(dtype_name(c.compute));
            CAPTURE(c.a16);
            Rng rng(seed++);
            // (k == 0: one unread element each, so that the tensors exist)
            auto dy = rng.normal(std::max<int64_t>(1, c.k * c.m)),
                 x = rng.normal(std::max<int64_t>(1, c.k * c.n)), c0 = rng.normal(c.m * c.n);
            auto db0 = rng.normal(c.m);
            const Tensor a = c.a16 ? to_device_as(dev, dy, c.compute) : to_device(dev, dy);
            GemmArgs g = dense_gemm(Trans::T, Trans::N, c.m, c.n, c.k, a, to_device(dev, x),
                                    to_device(dev, c0));
            g.beta = c.beta;
            g.compute = c.compute;
            const GemmEpilogue e{.dbias = to_device(dev, db0)};
            // cudasim's stand-in takes every product; the real cuBLASLt's heuristic decides
            // (either way is correct: the fallback is the unfused ops).
            const std::string kernel = dev.gemm_epilogue_kernel(g, e);
            if (dev.backend_name() == "cudasim")
                CHECK(kernel == (c.k ? "cublaslt" : "unfused"));
            else if (dev.backend_name() == "cuda")
                CHECK((kernel == "cublaslt" || kernel == "unfused"));
            else
                CHECK(kernel.empty());
            dev.gemm_epilogue(g, e);

            ref::Vec want = c0, db = db0;
            ref::gemm(ref::gemm_dims(g), ref::rounded(dy, c.compute), ref::rounded(x, c.compute),
                      want);  // the product rounds its operands to the compute dtype
            ref::bias_grad(db, c.a16 ? ref::rounded(dy, c.compute) : dy, c.k, c.m);
            const double depth = std::sqrt(static_cast<double>(c.k) + 1);
            check_close(from_device(dev, g.c), want, Tol{1e-4, 2e-5 * depth}, "dW");
            // The sums of the f32 dy (cpu, opencl, the fallback) or, on cuda with 16-bit
            // products, of the rounded dy the product reads (2^-9 relative each); of the
            // stored 16-bit dy everywhere (a16).
            const double rel = c.compute == DType::f32 || c.a16 ? 2e-5 : 4e-3;
            check_close(from_device(dev, e.dbias), db, Tol{1e-4, rel * depth}, "dbias");
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
        // pre_act written over an operand or the bias, a bias inside C: refused (the kernels
        // would read values already overwritten), adjacent views accepted.
        g = good();
        const Tensor ap = zeros(dev, m * k + m * n);
        g.a = ap.view(0, {m * k});
        CHECK_THROWS_WITH_AS(
            dev.gemm_epilogue(
                g, GemmEpilogue{.act = EpilogueAct::gelu, .pre_act = ap.view(m * k - 1, {m * n})}),
            doctest::Contains("pre_act overlaps A"), Error);
        dev.gemm_epilogue(
            g, GemmEpilogue{.act = EpilogueAct::gelu, .pre_act = ap.view(m * k, {m * n})});
        g = good();
        const Tensor bp = zeros(dev, k * n + m * n);
        g.b = bp.view(m * n, {k * n});
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, GemmEpilogue{.act = EpilogueAct::gelu,
                                                               .pre_act = bp.view(1, {m * n})}),
                             doctest::Contains("pre_act overlaps B"), Error);
        const Tensor biasp = zeros(dev, m * n + n);
        CHECK_THROWS_WITH_AS(
            dev.gemm_epilogue(good(), GemmEpilogue{.bias = biasp.view(m * n, {n}),
                                                   .act = EpilogueAct::gelu,
                                                   .pre_act = biasp.view(1, {m * n})}),
            doctest::Contains("pre_act overlaps the bias"), Error);
        g = good();
        const Tensor cb = zeros(dev, m * n + n);
        g.c = cb.view(0, {m * n});
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, GemmEpilogue{.bias = cb.view(m * n - 1, {n})}),
                             doctest::Contains("bias overlaps C"), Error);
        dev.gemm_epilogue(g, GemmEpilogue{.bias = cb.view(m * n, {n})});

        // dbias: a weight-gradient product dW [m, n] = dy^T x with dy [k, m] stored densely.
        auto wgrad = [&] {
            return dense_gemm(Trans::T, Trans::N, m, n, k, zeros(dev, k * m), zeros(dev, k * n),
                              zeros(dev, m * n));
        };
        const GemmEpilogue db{.dbias = zeros(dev, m)};
        dev.gemm_epilogue(wgrad(), db);  // the valid call
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(good(), db), doctest::Contains("ta T, lda m"),
                             Error);
        g = wgrad();
        g.lda = m + 1;
        g.a = zeros(dev, k * (m + 1));
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, db), doctest::Contains("lda m"), Error);
        g = wgrad();
        g.alpha = 0.5f;
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, db), doctest::Contains("must be 1"), Error);
        CHECK_THROWS_WITH_AS(
            dev.gemm_epilogue(wgrad(), GemmEpilogue{.bias = zeros(dev, n), .dbias = zeros(dev, m)}),
            doctest::Contains("dbias with a bias"), Error);
        g = wgrad();
        g.a = zeros(dev, k * m, DType::bf16);  // a 16-bit dy must be of the compute type
        g.compute = DType::f16;
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, db), doctest::Contains("A is bf16"), Error);
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(wgrad(), GemmEpilogue{.dbias = zeros(dev, m - 1)}),
                             doctest::Contains("dbias"), Error);
        g = wgrad();
        const Tensor cd = zeros(dev, m * n + m);
        g.c = cd.view(0, {m * n});
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, GemmEpilogue{.dbias = cd.view(m * n - 1, {m})}),
                             doctest::Contains("dbias overlaps C"), Error);
        dev.gemm_epilogue(g, GemmEpilogue{.dbias = cd.view(m * n, {m})});
        g = wgrad();
        const Tensor ad = zeros(dev, k * m + m);
        g.a = ad.view(0, {k * m});
        CHECK_THROWS_WITH_AS(dev.gemm_epilogue(g, GemmEpilogue{.dbias = ad.view(1, {m})}),
                             doctest::Contains("dbias overlaps A"), Error);
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
            const std::string kernel = expected_kernel(dev, g, EpilogueAct::gelu);
            const auto table = prof.table();
            REQUIRE(table.size() == 1);
            CHECK(table[0].op ==
                  (kernel.empty() ? "gemm_epilogue" : "gemm_epilogue[" + kernel + "]"));
            CHECK(table[0].flops == doctest::Approx(2.0 * m * n * k + 10.0 * m * n));
        }
    });
}

TEST_CASE("ops: --profile-shapes books each product under its shape, dtypes and epilogue") {
    for_each_test_device([&](Device& dev) {
        ProfilingDevice prof(dev, true);
        const int64_t m = 3, n = 16, k = 4;
        GemmArgs g = dense_gemm(Trans::N, Trans::N, m, n, k, zeros(dev, m * k), zeros(dev, k * n),
                                zeros(dev, m * n));
        prof.gemm_epilogue(g, GemmEpilogue{.act = EpilogueAct::gelu, .pre_act = zeros(dev, m * n)});
        prof.gemm(g);
        g.beta = 1.0f;
        g.compute = DType::bf16;
        prof.gemm(g);
        prof.gemm(g);
        const std::string kernel = expected_kernel(dev, g, EpilogueAct::gelu);
        std::map<std::string, int64_t> calls;
        for (const OpProfile& p : prof.table()) calls[p.op] = p.calls;
        const std::string fused =
            kernel.empty() ? "gemm_epilogue" : "gemm_epilogue[" + kernel + "]";
        CHECK(calls[fused + " 3x16x4 NN f32*f32 +gelu"] == 1);
        CHECK(calls["gemm 3x16x4 NN f32*f32"] == 1);
        CHECK(calls["gemm 3x16x4 NN f32*f32->bf16 +C"] == 2);
        CHECK(calls.size() == 3);
    });
}
