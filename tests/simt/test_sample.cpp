// Harness tests of kernels_cuda/sample.cuh: greedy with exact ties (lowest id wins), and
// temperature / top-k / top-p draws, which must pick exactly the reference's token (the same
// Philox counter), on vocabularies of 1, odd sizes and more than one block's threads; the
// Philox step partly or wholly on the device (step_dev, read as uint32) draws the same.
#include "harness_util.h"
#include "sample.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: sample greedy and stochastic") {
    struct Case {
        float temperature;
        int64_t top_k;
        float top_p;
    };
    const Case cases[] = {{0, 0, 1},       {1, 0, 1},    {0.7f, 5, 1},
                          {1.3f, 0, 0.9f}, {1, 3, 0.5f}, {2, 1, 1}};
    for (auto [B, V] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {4, 300}, {2, 1100}}) {
        CAPTURE(B);
        CAPTURE(V);
        Rng rng(static_cast<uint64_t>(B * 10 + V));
        Vec logits = rng.grid(B * V, -8, 8, 0.25);  // ties for greedy and for the sort
        auto draw = [&](const mtk::SampleParams& sp, const char* what) {
            return two_schedules(what, [&] {
                FVec l = to_f32(logits);
                IVec ids(B, -1);
                std::vector<uint64_t> scratch(mtk::sample_scratch_bytes(B, V) / sizeof(uint64_t),
                                              7);
                mtk::sample(nullptr, ids.data(), l.data(), B, V, sp, scratch.data());
                return ids;
            });
        };
        for (const Case& c : cases) {
            if (V > 1000 && c.top_k != 0) continue;  // the large vocabulary: fewer cases (time)
            for (uint64_t step : {uint64_t(0), uint64_t(12345)}) {
                CAPTURE(c.temperature);
                CAPTURE(c.top_k);
                CAPTURE(c.top_p);
                CAPTURE(step);
                mtk::SampleParams sp{c.temperature, c.top_k, c.top_p, 42, step};
                const IVec got = draw(sp, "sample");
                moetrain::SampleArgs sa;
                sa.temperature = c.temperature;
                sa.top_k = c.top_k;
                sa.top_p = c.top_p;
                sa.seed = 42;
                sa.step = step;
                IVec want(B);
                ref::sample(want, logits, B, V, sa);
                moetrain::test::check_equal(got, want, "sampled ids");
                // The step from the device: all of it (12345 fits), or the host step with the
                // device value -1, read as uint32 0xffffffff: step + 2^32 - 1.
                for (int32_t dev : {static_cast<int32_t>(step), int32_t{-1}}) {
                    if (c.temperature == 0 || V > 1000) break;  // no draw / time
                    CAPTURE(dev);
                    const int32_t step_dev[1] = {dev};
                    mtk::SampleParams dp = sp;
                    dp.step = dev == -1 ? step : 0;
                    dp.step_dev = step_dev;
                    const IVec dgot = draw(dp, "sample (device step)");
                    moetrain::SampleArgs da = sa;
                    da.step = step + (dev == -1 ? 0xffffffffull : 0);
                    IVec dwant(B);
                    ref::sample(dwant, logits, B, V, da);
                    moetrain::test::check_equal(dgot, dwant, "sampled ids (device step)");
                }
            }
        }
    }
}
