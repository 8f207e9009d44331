// Harness tests of kernels_cuda/activations.cuh: gelu / relu / silu forward and backward,
// SwiGLU forward and backward, and the row softmax (also in place) on awkward sizes; the
// element-wise ones also with their arguments aligned, at element offsets and mismatched (the
// 16-byte and the single-element paths, vector_paths.h).
#include "harness_util.h"
#include "activations.cuh"
// after the kernels:
#include "vector_paths.h"

using namespace simt_test;
namespace ref = moetrain::ref;
using moetrain::Act;

TEST_CASE("simt: activations act_fwd, act_bwd, swiglu") {
    for (int64_t n : {int64_t(1), int64_t(33), int64_t(1023), int64_t(4099)}) {
        CAPTURE(n);
        Rng rng(static_cast<uint64_t>(n) + 5);
        Vec x = rng.normal(n, 3.0), dy = rng.normal(n), up = rng.normal(n);
        x[0] = 0.0;  // relu's kink
        for (Act a : {Act::gelu, Act::relu, Act::silu}) {
            CAPTURE(static_cast<int>(a));
            auto got = two_schedules("act", [&] {
                FVec fx = to_f32(x), fdy = to_f32(dy), y(n), dx(n);
                mtk::act_fwd(nullptr, static_cast<mtk::ActKind>(a), y.data(), fx.data(), n);
                mtk::act_bwd(nullptr, static_cast<mtk::ActKind>(a), dx.data(), fdy.data(),
                             fx.data(), n);
                return std::make_pair(y, dx);
            });
            Vec wy(n), wdx(n);
            ref::act_fwd(a, wy, x, n);
            ref::act_bwd(a, wdx, dy, x, n);
            check_close(got.first, wy, Tol{1e-5, 1e-6}, "act_fwd");
            check_close(got.second, wdx, Tol{1e-5, 1e-6}, "act_bwd");
        }
        auto got = two_schedules("swiglu", [&] {
            FVec g = to_f32(x), u = to_f32(up), dh = to_f32(dy), h(n), dg(n), du(n);
            mtk::swiglu_fwd(nullptr, h.data(), g.data(), u.data(), n);
            mtk::swiglu_bwd(nullptr, dg.data(), du.data(), dh.data(), g.data(), u.data(), n);
            return std::make_tuple(h, dg, du);
        });
        Vec wh(n), wdg(n), wdu(n);
        ref::swiglu_fwd(wh, x, up, n);
        ref::swiglu_bwd(wdg, wdu, dy, x, up, n);
        check_close(std::get<0>(got), wh, Tol{1e-5, 1e-6}, "swiglu h");
        check_close(std::get<1>(got), wdg, Tol{1e-5, 1e-6}, "swiglu dgate");
        check_close(std::get<2>(got), wdu, Tol{1e-5, 1e-6}, "swiglu dup");
    }
}

TEST_CASE("simt: activations softmax rows, in place") {
    const Shapes shapes = {{1, 1}, {3, 7}, {5, 257}, {2, 5000}};
    for_each_shape(shapes, 1, [&](int64_t rows, int64_t cols, Rng& rng) {
        Vec x = rng.normal(rows * cols, 4.0);
        auto got = two_schedules("softmax", [&] {
            FVec fx = to_f32(x), y(rows * cols);
            mtk::softmax(nullptr, y.data(), fx.data(), rows, cols);
            mtk::softmax(nullptr, fx.data(), fx.data(), rows, cols);  // in place
            return std::make_pair(y, fx);
        });
        Vec want(rows * cols);
        ref::softmax(want, x, rows, cols);
        check_close(got.first, want, Tol{1e-5, 1e-7}, "softmax");
        check_close(got.second, want, Tol{1e-5, 1e-7}, "softmax in place");
    });
}

TEST_CASE(
    "simt: activations act_fwd, act_bwd, swiglu on aligned, offset and mismatched arguments") {
    for (int64_t n : vector_sizes()) {
        CAPTURE(n);
        Rng rng(static_cast<uint64_t>(n) + 15);
        Vec x = rng.normal(n, 3.0), dy = rng.normal(n), up = rng.normal(n);
        auto groups = [&](const Placement& p) { return groups_possible(p, n, 4); };
        for (Act a : {Act::gelu, Act::relu, Act::silu}) {
            CAPTURE(static_cast<int>(a));
            const auto kind = static_cast<mtk::ActKind>(a);
            auto y = across_placements(
                "act_fwd",
                [&](const Placement& p) {
                    Placed<float> out(FVec(n, 0.0f), p.offset(0)), in(to_f32(x), p.offset(1));
                    mtk::act_fwd(nullptr, kind, out.data(), in.data(), n);
                    return out.values();
                },
                groups);
            auto dx = across_placements(
                "act_bwd",
                [&](const Placement& p) {
                    Placed<float> out(FVec(n, 0.0f), p.offset(0)), d(to_f32(dy), p.offset(1)),
                        in(to_f32(x), p.offset(2));
                    mtk::act_bwd(nullptr, kind, out.data(), d.data(), in.data(), n);
                    return out.values();
                },
                groups);
            Vec wy(n), wdx(n);
            ref::act_fwd(a, wy, x, n);
            ref::act_bwd(a, wdx, dy, x, n);
            check_close(y, wy, Tol{1e-5, 1e-6}, "act_fwd");
            check_close(dx, wdx, Tol{1e-5, 1e-6}, "act_bwd");
        }
        auto h = across_placements(
            "swiglu_fwd",
            [&](const Placement& p) {
                Placed<float> out(FVec(n, 0.0f), p.offset(0)), g(to_f32(x), p.offset(1)),
                    u(to_f32(up), p.offset(2));
                mtk::swiglu_fwd(nullptr, out.data(), g.data(), u.data(), n);
                return out.values();
            },
            groups);
        auto grads = across_placements(
            "swiglu_bwd",
            [&](const Placement& p) {
                Placed<float> dg(FVec(n, 0.0f), p.offset(0)), du(FVec(n, 0.0f), p.offset(1)),
                    dh(to_f32(dy), p.offset(2)), g(to_f32(x), p.offset(3)),
                    u(to_f32(up), p.offset(4));
                mtk::swiglu_bwd(nullptr, dg.data(), du.data(), dh.data(), g.data(), u.data(), n);
                return std::make_pair(dg.values(), du.values());
            },
            groups);
        Vec wh(n), wdg(n), wdu(n);
        ref::swiglu_fwd(wh, x, up, n);
        ref::swiglu_bwd(wdg, wdu, dy, x, up, n);
        check_close(h, wh, Tol{1e-5, 1e-6}, "swiglu h");
        check_close(grads.first, wdg, Tol{1e-5, 1e-6}, "swiglu dgate");
        check_close(grads.second, wdu, Tol{1e-5, 1e-6}, "swiglu dup");
    }
}

// A 16-bit output (mixed-precision storage of the FFN hidden) holds the f32 output rounded to
// nearest even, bit for bit, on every placement (output at the first offset, inputs at the other).
TEST_CASE("simt: activations act_fwd, act_bwd, swiglu_fwd write 16-bit outputs as rounded f32") {
    for (int64_t n : vector_sizes()) {
        CAPTURE(n);
        Rng rng(static_cast<uint64_t>(n) + 25);
        Vec x = rng.normal(n, 3.0), up = rng.normal(n), dy = rng.normal(n, 1e3);
        if (n > 2) x[1] = 1e6;  // f16 overflows to Inf
        const FVec fx = to_f32(x), fu = to_f32(up), fdy = to_f32(dy);
        auto groups = [&](const Placement& p) { return groups_possible(p, n, 4); };
        for (auto kind : {mtk::FloatKind::bf16, mtk::FloatKind::f16}) {
            CAPTURE(static_cast<int>(kind));
            const bool bf16 = kind == mtk::FloatKind::bf16;
            for (Act a : {Act::gelu, Act::relu, Act::silu}) {
                CAPTURE(static_cast<int>(a));
                const auto ak = static_cast<mtk::ActKind>(a);
                FVec y32(n);
                mtk::act_fwd(nullptr, ak, y32.data(), fx.data(), n);
                auto y = across_placements(
                    "act_fwd 16-bit y",
                    [&](const Placement& p) {
                        Placed<uint16_t> out(std::vector<uint16_t>(n, 0), p.offset(0));
                        Placed<float> in(fx, p.offset(1));
                        mtk::act_fwd(nullptr, ak, out.data(), in.data(), n, kind);
                        return out.values();
                    },
                    groups);
                CHECK_MESSAGE(y == rounded16(y32, bf16), "act_fwd: 16-bit y != rounded f32 y");
                FVec dx32(n);
                mtk::act_bwd(nullptr, ak, dx32.data(), fdy.data(), fx.data(), n);
                auto dx = across_placements(
                    "act_bwd 16-bit dx",
                    [&](const Placement& p) {
                        Placed<uint16_t> out(std::vector<uint16_t>(n, 0), p.offset(0));
                        Placed<float> d(fdy, p.offset(1)), in(fx, p.offset(2));
                        mtk::act_bwd(nullptr, ak, out.data(), d.data(), in.data(), n, kind);
                        return out.values();
                    },
                    groups);
                CHECK_MESSAGE(dx == rounded16(dx32, bf16), "act_bwd: 16-bit dx != rounded f32 dx");
            }
            FVec h32(n);
            mtk::swiglu_fwd(nullptr, h32.data(), fx.data(), fu.data(), n);
            auto h = across_placements(
                "swiglu_fwd 16-bit h",
                [&](const Placement& p) {
                    Placed<uint16_t> out(std::vector<uint16_t>(n, 0), p.offset(0));
                    Placed<float> g(fx, p.offset(1)), u(fu, p.offset(2));
                    mtk::swiglu_fwd(nullptr, out.data(), g.data(), u.data(), n, kind);
                    return out.values();
                },
                groups);
            CHECK_MESSAGE(h == rounded16(h32, bf16), "swiglu_fwd: 16-bit h != rounded f32 h");
        }
    }
}
