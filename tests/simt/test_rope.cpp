// Harness tests of kernels_cuda/rope.cuh: forward and inverse rotation with a position offset
// (the KV-cache case), and that the inverse undoes the forward rotation.
#include "harness_util.h"
#include "rope.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: rope forward, inverse, offset positions") {
    struct Case {
        int64_t B, T, nh, hd, pos0;
    };
    for (Case c : {Case{1, 1, 1, 2, 0}, Case{2, 5, 3, 8, 0}, Case{1, 7, 2, 34, 11}, Case{2, 3, 1, 128, 1000}}) {
        CAPTURE(c.T);
        CAPTURE(c.hd);
        CAPTURE(c.pos0);
        const int64_t n = c.B * c.T * c.nh * c.hd;
        Rng rng(static_cast<uint64_t>(n + c.pos0));
        Vec x = rng.normal(n);
        const float theta = 10000.0f * 1.3f;
        for (bool inverse : {false, true}) {
            CAPTURE(inverse);
            auto got = two_schedules("rope", [&] {
                FVec fx = to_f32(x);
                mtk::rope(nullptr, fx.data(), c.B, c.T, c.nh, c.hd, theta, c.pos0, inverse);
                return fx;
            });
            Vec want = x;
            ref::rope(want, c.B, c.T, c.nh, c.hd, theta, c.pos0, inverse);
            check_close(got, want, Tol{1e-4, 1e-4}, "rope");
            FVec back = got;
            mtk::rope(nullptr, back.data(), c.B, c.T, c.nh, c.hd, theta, c.pos0, !inverse);
            check_close(back, x, Tol{1e-4, 1e-4}, "rope round trip");
        }
    }
}
