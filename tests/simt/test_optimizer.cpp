// Harness tests of kernels_cuda/optimizer.cuh: AdamW and SGD with clipping active, inactive and
// without a norm buffer, and a gradient scale.
#include "harness_util.h"
#include "optimizer.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: optimizer adamw and sgd") {
    for (int64_t n : {int64_t(1), int64_t(33), int64_t(4099)}) {
        CAPTURE(n);
        Rng rng(static_cast<uint64_t>(n) + 99);
        Vec p0 = rng.normal(n), g = rng.normal(n), m0 = rng.normal(n, 0.1), v0 = rng.uniform(n, 0.0, 0.01);
        moetrain::AdamWArgs a;
        a.lr = 1e-3f;
        a.wd = 0.1f;
        a.bc1 = 1.0f - 0.9f * 0.9f;
        a.bc2 = 1.0f - 0.95f * 0.95f;
        mtk::AdamWParams ka{a.lr, a.b1, a.b2, a.eps, a.wd, a.bc1, a.bc2};
        // (gnorm_sq, clip): clipping active, inactive (norm below clip), and off without a norm.
        for (auto [gsq, clip, with_norm] : {std::tuple<float, float, bool>{400.0f, 1.0f, true},
                                            {0.25f, 1.0f, true}, {0.0f, 0.0f, false}}) {
            CAPTURE(gsq);
            CAPTURE(clip);
            const float scale = 0.5f;
            auto got = two_schedules("adamw/sgd", [&] {
                FVec p = to_f32(p0), fg = to_f32(g), m = to_f32(m0), v = to_f32(v0), ps = to_f32(p0);
                FVec norm = {gsq};
                const float* pn = with_norm ? norm.data() : nullptr;
                mtk::adamw(nullptr, p.data(), fg.data(), m.data(), v.data(), n, ka, pn, clip, scale);
                mtk::sgd(nullptr, ps.data(), fg.data(), n, 0.01f, pn, clip, scale);
                return std::make_tuple(p, m, v, ps);
            });
            Vec wp = p0, wm = m0, wv = v0, wps = p0;
            ref::adamw(wp, g, wm, wv, n, a, gsq, clip, scale);
            ref::sgd(wps, g, n, 0.01, gsq, clip, scale);
            check_close(std::get<0>(got), wp, Tol{1e-5, 1e-6}, "adamw p");
            check_close(std::get<1>(got), wm, Tol{1e-5, 1e-7}, "adamw m");
            check_close(std::get<2>(got), wv, Tol{1e-5, 1e-8}, "adamw v");
            check_close(std::get<3>(got), wps, Tol{1e-5, 1e-7}, "sgd p");
        }
    }
}
