// Harness tests of kernels_cuda/elementwise.cuh: fill, add (in place too), axpby (beta 0 and
// not), add_bias, on the awkward sizes, against the float64 reference.
#include "harness_util.h"
// the kernels under test (compiled here by g++ against simt.h)
#include "elementwise.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: elementwise add, axpby") {
    for (int64_t n : moetrain::test::awkward_sizes()) {
        CAPTURE(n);
        Rng rng(static_cast<uint64_t>(n));
        Vec a = rng.normal(n), b = rng.normal(n), y0 = rng.normal(n);
        auto got = two_schedules("add", [&] {
            FVec out = to_f32(a), fb = to_f32(b);
            mtk::add(nullptr, out.data(), out.data(), fb.data(), n);  // out aliases a
            return out;
        });
        Vec want(n);
        ref::add(want, a, b, n);
        check_close(got, want, Tol{}, "add");

        for (float beta : {0.0f, -0.75f}) {
            CAPTURE(beta);
            auto y = two_schedules("axpby", [&] {
                FVec fy = to_f32(y0), fx = to_f32(a);
                if (beta == 0.0f) fy.assign(n, NAN);  // beta 0 must not read y
                mtk::axpby(nullptr, fy.data(), 1.5f, fx.data(), beta, n);
                return fy;
            });
            Vec wy = y0;
            if (beta == 0.0f) wy.assign(n, 0.0);
            ref::axpby(wy, 1.5, a, beta, n);
            check_close(y, wy, Tol{}, "axpby");
        }
    }
}

TEST_CASE("simt: elementwise add_bias") {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {17, 33}, {5, 257}}) {
        CAPTURE(rows);
        CAPTURE(cols);
        Rng rng(static_cast<uint64_t>(rows * 1000 + cols));
        Vec y0 = rng.normal(rows * cols), bias = rng.normal(cols);
        auto got = two_schedules("add_bias", [&] {
            FVec y = to_f32(y0), fb = to_f32(bias);
            mtk::add_bias(nullptr, y.data(), fb.data(), rows, cols);
            return y;
        });
        Vec want = y0;
        ref::add_bias(want, bias, rows, cols);
        check_close(got, want, Tol{}, "add_bias");
    }
}

TEST_CASE("simt: elementwise fill of 4-, 2- and 1-byte elements") {
    for (int64_t n : {int64_t(1), int64_t(257), int64_t(4099)}) {
        CAPTURE(n);
        auto got = two_schedules("fill", [&] {
            std::vector<uint32_t> w(n + 1, 7u);
            std::vector<uint16_t> h(n + 1, 7u);
            std::vector<uint8_t> b(n + 1, 7u);
            mtk::fill(nullptr, w.data(), 4, 0xdeadbeefu, n);
            mtk::fill(nullptr, h.data(), 2, 0xbeefu, n);
            mtk::fill(nullptr, b.data(), 1, 0xefu, n);
            return std::make_tuple(w, h, b);
        });
        auto& [w, h, b] = got;
        for (int64_t i = 0; i < n; ++i) {
            REQUIRE(w[i] == 0xdeadbeefu);
            REQUIRE(h[i] == 0xbeefu);
            REQUIRE(b[i] == 0xefu);
        }
        CHECK(w[n] == 7u);  // nothing past n is written
        CHECK(h[n] == 7u);
        CHECK(b[n] == 7u);
    }
}
