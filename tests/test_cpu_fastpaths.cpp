// CPU backend fast paths that the generic op tests (small shapes) do not reach: gemm routed
// to oneDNN's matmul primitive (Trans::T x Trans::N, m >= n, k >= 1024: the weight-gradient
// shape), with alpha, beta, padded leading dimensions, batches, a repeated shape (primitive
// cache hit) and beta = 0 over a C full of NaN (C must not be read). Against the float64
// reference, tolerance as in test_ops_dense.cpp.
#include <cmath>
#include <limits>

#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {

struct TallCase {
    int64_t m, n, k, batch, pad;
    float alpha, beta;
};

void check_tall_gemm(Device& dev, const TallCase& c, uint64_t seed, bool nan_c) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(c.beta);
    // A stored [k, m], B stored [k, n]
    GemmArgs g = padded_gemm(Trans::T, Trans::N, c.m, c.n, c.k, c.alpha, c.beta, c.pad, c.batch);
    const ref::Gemm dims = ref::gemm_dims(g);
    Rng rng(seed);
    auto a = rng.normal(dims.stride_a * c.batch), b = rng.normal(dims.stride_b * c.batch);
    auto cc = rng.normal(dims.stride_c * c.batch);
    auto want = cc;
    if (nan_c)
        for (int64_t i = 0; i < c.batch; ++i)
            for (int64_t r = 0; r < c.m; ++r)
                for (int64_t j = 0; j < c.n; ++j)
                    cc[i * dims.stride_c + r * g.ldc + j] =
                        std::numeric_limits<double>::quiet_NaN();
    g.a = to_device(dev, a);
    g.b = to_device(dev, b);
    g.c = to_device(dev, cc);
    dev.gemm(g);
    ref::gemm(dims, a, b, want);
    check_close(from_device(dev, g.c), want,
                Tol{1e-4, 2e-5 * std::sqrt(static_cast<double>(c.k) + 1)}, "tall gemm");
}

}  // namespace

TEST_CASE("cpu: gemm on the matmul-primitive path (tall weight-gradient shapes)") {
    auto dev = open_device("cpu");
    const TallCase cases[] = {
        {64, 16, 1024, 1, 0, 1.0f, 1.0f},  // the dW += dy^T x of a linear layer
        {40, 40, 1030, 2, 3, 0.5f, 0.7f},  // batched, padded, alpha and beta
        {64, 16, 1024, 1, 0, 1.0f, 1.0f},  // same shape again: cached primitive
        {100, 7, 1500, 1, 1, -1.0f, 0.25f},
    };
    uint64_t seed = 500;
    for (const auto& c : cases) check_tall_gemm(*dev, c, seed++, false);
    check_tall_gemm(*dev, {48, 32, 1024, 1, 2, 1.0f, 0.0f}, seed++, true);  // C is not read
}
