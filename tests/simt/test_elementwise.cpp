// Harness tests of kernels_cuda/elementwise.cuh: fill, add (in place too), axpby (beta 0 and
// not), add_bias, on the awkward sizes, against the float64 reference; and each with its
// arguments aligned, at element offsets and mismatched (the 16-byte and the single-element
// paths, vector_paths.h).
#include "harness_util.h"
// the kernels under test (compiled here by g++ against simt.h)
#include "elementwise.cuh"
// after the kernels:
#include "vector_paths.h"

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
    const Shapes shapes = {{1, 1}, {3, 7}, {17, 33}, {5, 257}};
    for_each_shape(shapes, 1000, [&](int64_t rows, int64_t cols, Rng& rng) {
        Vec y0 = rng.normal(rows * cols), bias = rng.normal(cols);
        auto got = two_schedules("add_bias", [&] {
            FVec y = to_f32(y0), fb = to_f32(bias);
            mtk::add_bias(nullptr, y.data(), fb.data(), rows, cols);
            return y;
        });
        Vec want = y0;
        ref::add_bias(want, bias, rows, cols);
        check_close(got, want, Tol{}, "add_bias");
    });
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

TEST_CASE("simt: elementwise add, axpby on aligned, offset and mismatched arguments") {
    for (int64_t n : vector_sizes()) {
        CAPTURE(n);
        Rng rng(static_cast<uint64_t>(n) + 11);
        Vec a = rng.normal(n), b = rng.normal(n), y0 = rng.normal(n);
        auto groups = [&](const Placement& p) { return groups_possible(p, n, 4); };
        auto sum = across_placements(
            "add",
            [&](const Placement& p) {
                Placed<float> out(to_f32(a), p.offset(0)), pb(to_f32(b), p.offset(1));
                mtk::add(nullptr, out.data(), out.data(), pb.data(), n);  // out aliases a
                return out.values();
            },
            groups);
        Vec want(n);
        ref::add(want, a, b, n);
        check_close(sum, want, Tol{}, "add");
        for (float beta : {0.0f, -0.75f}) {
            CAPTURE(beta);
            auto y = across_placements(
                "axpby",
                [&](const Placement& p) {
                    Placed<float> py(beta == 0.0f ? FVec(n, NAN) : to_f32(y0), p.offset(0)),
                        px(to_f32(a), p.offset(1));
                    mtk::axpby(nullptr, py.data(), 1.5f, px.data(), beta, n);
                    return py.values();
                },
                groups);
            Vec wy = beta == 0.0f ? Vec(n, 0.0) : y0;
            ref::axpby(wy, 1.5, a, beta, n);
            check_close(y, wy, Tol{}, "axpby");
        }
    }
}

TEST_CASE("simt: elementwise add_bias on aligned, offset and mismatched arguments") {
    const Shapes shapes = {{1, 4}, {3, 7}, {17, 32}, {5, 256}, {2, 2}};
    for_each_shape(shapes, 100, [&](int64_t rows, int64_t cols, Rng& rng) {
        Vec y0 = rng.normal(rows * cols), bias = rng.normal(cols);
        // Groups only when every row and the bias start one: cols % 4 == 0, both aligned.
        auto groups = [&](const Placement& p) {
            return cols % 4 == 0 && p.first % 4 == 0 && p.rest % 4 == 0;
        };
        auto got = across_placements(
            "add_bias",
            [&](const Placement& p) {
                Placed<float> y(to_f32(y0), p.offset(0)), b(to_f32(bias), p.offset(1));
                mtk::add_bias(nullptr, y.data(), b.data(), rows, cols);
                return y.values();
            },
            groups);
        Vec want = y0;
        ref::add_bias(want, bias, rows, cols);
        check_close(got, want, Tol{}, "add_bias");
    });
}

TEST_CASE("simt: elementwise fill at aligned and offset starts (16-byte stores)") {
    auto check_fill = [](auto zero, int elem_bytes, uint32_t bits, int64_t n) {
        using T = decltype(zero);
        const int64_t width = 16 / elem_bytes;
        auto got = across_placements(
            "fill",
            [&](const Placement& p) {
                Placed<T> out(std::vector<T>(n, T(7)), p.offset(0));
                mtk::fill(nullptr, out.data(), elem_bytes, bits, n);
                return out.values();
            },
            [&](const Placement& p) { return groups_possible(p, n, width, true); });
        for (int64_t i = 0; i < n; ++i) REQUIRE(got[i] == static_cast<T>(bits));
    };
    for (int64_t n : {int64_t(1), int64_t(5), int64_t(16), int64_t(37), int64_t(4099)}) {
        CAPTURE(n);
        check_fill(uint32_t(0), 4, 0xdeadbeefu, n);
        check_fill(uint16_t(0), 2, 0xbeefu, n);
        check_fill(uint8_t(0), 1, 0xefu, n);
    }
}
