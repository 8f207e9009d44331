// Harness tests of kernels_cuda/reduce.cuh: sum and sum of squares (accumulate or not, n = 0
// included) and the bias gradient (column sums over several row chunks).
#include "harness_util.h"
#include "reduce.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: reduce sum, sum_squares") {
    std::vector<int64_t> sizes = moetrain::test::awkward_sizes();
    sizes.push_back(0);
    sizes.push_back(70001);  // several partial blocks
    for (int64_t n : sizes) {
        CAPTURE(n);
        Rng rng(static_cast<uint64_t>(n) + 11);
        Vec x = rng.normal(n);
        const Tol tol{1e-5, 1e-6 * std::sqrt(static_cast<double>(n) + 1.0) * 4};
        for (bool acc : {false, true}) {
            CAPTURE(acc);
            auto got = two_schedules("sum", [&] {
                FVec fx = to_f32(x), out = {0.25f}, out2 = {0.5f};
                FVec scratch(mtk::reduce_scratch_bytes(n) / sizeof(float) + 1, NAN);
                mtk::sum(nullptr, out.data(), fx.data(), n, -0.5f, acc, scratch.data());
                mtk::sum_squares(nullptr, out2.data(), fx.data(), n, acc, scratch.data());
                return std::make_pair(out, out2);
            });
            Vec want = {0.25}, want2 = {0.5};
            ref::sum(want, x, n, -0.5, acc);
            ref::sum_squares(want2, x, n, acc);
            check_close(got.first, want, tol, "sum");
            check_close(got.second, want2, Tol{1e-5, 1e-5}, "sum_squares");
        }
    }
}

TEST_CASE("simt: reduce bias_grad") {
    const Shapes shapes = {{1, 1}, {3, 7}, {65, 33}, {130, 257}, {1, 300}};
    for_each_shape(shapes, 7, [&](int64_t rows, int64_t cols, Rng& rng) {
        Vec dy = rng.normal(rows * cols), db0 = rng.normal(cols);
        auto got = two_schedules("bias_grad", [&] {
            FVec db = to_f32(db0), fdy = to_f32(dy);
            FVec scratch(mtk::colsum_scratch_bytes(rows, cols) / sizeof(float), NAN);
            mtk::bias_grad(nullptr, db.data(), fdy.data(), rows, cols, scratch.data());
            return db;
        });
        Vec want = db0;
        ref::bias_grad(want, dy, rows, cols);
        check_close(got, want, Tol{1e-5, 1e-5}, "bias_grad");
    });
}
