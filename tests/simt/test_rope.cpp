// Harness tests of kernels_cuda/rope.cuh: forward and inverse rotation with a position offset
// (the KV-cache case), that the inverse undoes the forward rotation, that a device-side offset
// (pos_dev, positive or negative, the host part making up the rest) rotates bit for bit like
// the same position given on the host, and that an offset leaving [0, 2^30) is reported and
// rotates nothing.
#include "harness_util.h"
#include "rope.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: rope forward, inverse, offset positions") {
    struct Case {
        int64_t B, T, nh, hd, pos0;
    };
    for (Case c : {Case{1, 1, 1, 2, 0}, Case{2, 5, 3, 8, 0}, Case{1, 7, 2, 34, 11},
                   Case{2, 3, 1, 128, 1000}}) {
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
                mtk::rope(nullptr, fx.data(), c.B, c.T, c.nh, c.hd, theta, c.pos0, nullptr, inverse,
                          nullptr);
                return fx;
            });
            Vec want = x;
            ref::rope(want, c.B, c.T, c.nh, c.hd, theta, c.pos0, inverse);
            check_close(got, want, Tol{1e-4, 1e-4}, "rope");
            FVec back = got;
            mtk::rope(nullptr, back.data(), c.B, c.T, c.nh, c.hd, theta, c.pos0, nullptr, !inverse,
                      nullptr);
            check_close(back, x, Tol{1e-4, 1e-4}, "rope round trip");
            // The same positions from a device-side offset: host 0 + device pos0, and host
            // pos0 + 5 with device -5.
            for (int32_t offset : {static_cast<int32_t>(c.pos0), int32_t{-5}}) {
                CAPTURE(offset);
                const int32_t pos_dev[1] = {offset};
                auto dev = two_schedules("rope (device offset)", [&] {
                    FVec fx = to_f32(x);
                    IVec err = {0, 0};
                    mtk::rope(nullptr, fx.data(), c.B, c.T, c.nh, c.hd, theta, c.pos0 - offset,
                              pos_dev, inverse, err.data());
                    CHECK(err[0] == 0);
                    return fx;
                });
                CHECK(same_bits(dev, got));
            }
        }
    }
}

TEST_CASE("simt: rope reports a device offset outside [0, 2^30) and rotates nothing") {
    const int64_t B = 2, T = 3, nh = 2, hd = 8, n = B * T * nh * hd;
    Rng rng(5);
    const FVec x = to_f32(rng.normal(n));
    for (int32_t offset : {int32_t{-3}, int32_t{(1 << 30) - 2}}) {
        CAPTURE(offset);
        const int32_t pos_dev[1] = {offset};
        FVec fx = x;
        IVec err = {0, 0};
        mtk::rope(nullptr, fx.data(), B, T, nh, hd, 10000.0f, 1, pos_dev, false, err.data());
        CHECK(err[0] == mtk::kErrRopePosition);
        CHECK(err[1] == offset);
        CHECK(same_bits(fx, x));
    }
}
