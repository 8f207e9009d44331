// Op tests, dense algebra and embeddings: gemm (every transpose pair, padded leading
// dimensions, alpha / beta, strided batches, k = 0), add, axpby, add_bias, bias_grad,
// embedding_fwd / embedding_bwd (duplicate ids). Tolerance: rel 1e-4, abs 1e-5 (gemm: abs
// 2e-5 * sqrt(k), the f32 rounding of a k-term dot product of unit-variance values).
#include <cmath>

#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {
struct GemmCase {
    int64_t m, n, k, batch, pad;
    float alpha, beta;
};

void run_gemm(Device& dev, Trans ta, Trans tb, const GemmCase& c, uint64_t seed) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(c.batch);
    CAPTURE(static_cast<int>(ta));
    CAPTURE(static_cast<int>(tb));
    // Gaps of 5, 3 and 1 elements between the batch entries.
    GemmArgs args = padded_gemm(ta, tb, c.m, c.n, c.k, c.alpha, c.beta, c.pad, c.batch, 5, 3, 1);
    const ref::Gemm g = ref::gemm_dims(args);
    Rng rng(seed);
    auto a = rng.normal(g.stride_a * c.batch), b = rng.normal(g.stride_b * c.batch);
    auto cc = rng.normal(g.stride_c * c.batch);
    args.a = to_device(dev, a);
    args.b = to_device(dev, b);
    args.c = to_device(dev, cc);
    dev.gemm(args);
    auto want = cc;  // elements outside the m x n products must keep what was uploaded
    ref::gemm(g, a, b, want);
    auto got = from_device(dev, args.c);
    check_close(got, want, Tol{1e-4, 2e-5 * std::sqrt(static_cast<double>(c.k) + 1)}, "gemm");
}
}  // namespace

TEST_CASE("ops: gemm every transpose, padded ld, alpha beta, batched") {
    const GemmCase cases[] = {
        {1, 1, 1, 1, 0, 1.0f, 0.0f},    {7, 5, 3, 1, 3, 1.0f, 0.0f},
        {33, 17, 65, 1, 0, 0.5f, 0.7f}, {64, 1, 129, 2, 1, 1.0f, 1.0f},
        {1, 100, 7, 3, 2, -1.0f, 0.0f}, {31, 63, 17, 3, 0, 1.0f, 0.25f},
        {5, 4, 0, 2, 1, 1.0f, 0.5f},
    };
    for_each_test_device([&](Device& dev) {
        uint64_t seed = 1;
        for (Trans ta : {Trans::N, Trans::T})
            for (Trans tb : {Trans::N, Trans::T})
                for (const auto& c : cases) run_gemm(dev, ta, tb, c, seed++);
    });
}

TEST_CASE("ops: gemm rejects a too small leading dimension") {
    for_each_test_device([&](Device& dev) {
        GemmArgs g;
        g.m = 4;
        g.n = 4;
        g.k = 4;
        g.a = zeros(dev, 16);
        g.b = zeros(dev, 16);
        g.c = zeros(dev, 16);
        g.lda = 3;
        g.ldb = 4;
        g.ldc = 4;
        CHECK_THROWS_AS(dev.gemm(g), Error);
    });
}

TEST_CASE("ops: add axpby") {
    for_each_test_device([&](Device& dev) {
        for (int64_t n : awkward_sizes()) {
            CAPTURE(n);
            Rng rng(static_cast<uint64_t>(n));
            auto a = rng.normal(n), b = rng.normal(n);
            Tensor ta = to_device(dev, a), tb = to_device(dev, b), out = zeros(dev, n);
            dev.add(out, ta, tb, n);
            ref::Vec want(static_cast<size_t>(n));
            ref::add(want, a, b, n);
            check_close(from_device(dev, out), want, Tol{}, "add");
            dev.add(ta, ta, tb, n);  // out aliases a
            check_close(from_device(dev, ta), want, Tol{}, "add in place");
            auto y = b;
            dev.axpby(tb, 0.75f, out, -1.5f, n);
            ref::axpby(y, 0.75, want, -1.5, n);
            check_close(from_device(dev, tb), y, Tol{}, "axpby");
        }
    });
}

TEST_CASE("ops: add_bias bias_grad") {
    for_each_shape({{1, 1}, {7, 65}, {129, 3}, {300, 257}}, [&](Device& dev, auto rows, auto cols) {
        Rng rng(static_cast<uint64_t>(rows * 1000 + cols));
        auto y = rng.normal(rows * cols), bias = rng.normal(cols), db = rng.normal(cols);
        Tensor ty = to_device(dev, y), tb = to_device(dev, bias), tdb = to_device(dev, db);
        dev.add_bias(ty, tb, rows, cols);
        dev.bias_grad(tdb, ty, rows, cols);  // accumulates onto db
        auto wy = y, wdb = db;
        ref::add_bias(wy, bias, rows, cols);
        ref::bias_grad(wdb, wy, rows, cols);
        check_close(from_device(dev, ty), wy, Tol{}, "add_bias");
        check_close(from_device(dev, tdb), wdb,
                    Tol{1e-4, 1e-5 * std::sqrt(static_cast<double>(rows))}, "bias_grad");
    });
}

// A dy stored in 16 bits (the gradient the model rounds once for both products): the bias
// gradient of its values, bit for bit the sums of its f32 widening (same order), at an odd
// element offset too (the CUDA column sums' 16-byte and single-element paths).
TEST_CASE("ops: bias_grad of a bf16 / f16 dy equals that of its f32 widening") {
    for_each_shape({{1, 1}, {7, 65}, {300, 256}}, [&](Device& dev, auto rows, auto cols) {
        Rng rng(static_cast<uint64_t>(rows * 1001 + cols));
        const auto dy = rng.normal(rows * cols), db = rng.normal(cols);
        for (DType t : {DType::bf16, DType::f16}) {
            for (int64_t offset : {int64_t{0}, int64_t{1}}) {
                CAPTURE(dtype_name(t));
                CAPTURE(offset);
                std::vector<double> padded(static_cast<size_t>(offset), 0.0);
                padded.insert(padded.end(), dy.begin(), dy.end());
                const Tensor d16 = to_device_as(dev, padded, t).view(offset, {rows * cols});
                Tensor d32 = zeros(dev, rows * cols), want = to_device(dev, db),
                       got = to_device(dev, db);
                dev.convert(d32, d16);
                dev.bias_grad(want, d32, rows, cols);
                dev.bias_grad(got, d16, rows, cols);
                CHECK(from_device(dev, got) == from_device(dev, want));
            }
        }
    });
}

TEST_CASE("ops: embedding_fwd embedding_bwd with duplicate ids") {
    for_each_test_device([&](Device& dev) {
        for (auto [n, dim, rows] :
             {std::tuple<int64_t, int64_t, int32_t>{1, 1, 1}, {17, 33, 5}, {200, 65, 300}}) {
            CAPTURE(n);
            CAPTURE(dim);
            Rng rng(static_cast<uint64_t>(n + dim));
            auto table = rng.normal(rows * dim);
            auto ids = rng.ints(n, 0, rows - 1);
            auto out0 = rng.normal(n * dim), dout = rng.normal(n * dim),
                 dtable = rng.normal(rows * dim);
            Tensor tt = to_device(dev, table), ti = to_device(dev, ids);
            for (bool acc : {false, true}) {
                Tensor to = to_device(dev, out0);
                dev.embedding_fwd(to, tt, ti, n, dim, acc);
                auto want = out0;
                ref::embedding_fwd(want, table, ids, n, dim, acc);
                check_close(from_device(dev, to), want, Tol{},
                            acc ? "embedding_fwd acc" : "embedding_fwd");
            }
            Tensor tdt = to_device(dev, dtable);
            dev.embedding_bwd(tdt, to_device(dev, dout), ti, n, dim);
            auto want = dtable;
            ref::embedding_bwd(want, dout, ids, n, dim);
            check_close(from_device(dev, tdt), want, Tol{}, "embedding_bwd");
        }
    });
}
