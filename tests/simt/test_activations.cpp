// Harness tests of kernels_cuda/activations.cuh: gelu / relu / silu forward and backward,
// SwiGLU forward and backward, and the row softmax (also in place) on awkward sizes.
#include "harness_util.h"
#include "activations.cuh"

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
                mtk::act_bwd(nullptr, static_cast<mtk::ActKind>(a), dx.data(), fdy.data(), fx.data(), n);
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
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {5, 257}, {2, 5000}}) {
        CAPTURE(rows);
        CAPTURE(cols);
        Rng rng(static_cast<uint64_t>(rows + cols));
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
    }
}
