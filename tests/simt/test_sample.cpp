// Harness tests of kernels_cuda/sample.cuh: greedy with exact ties (lowest id wins), and
// temperature / top-k / top-p draws, which must pick exactly the reference's token (the same
// Philox counter), on vocabularies of 1, odd sizes and more than one block's threads; the
// Philox step partly or wholly on the device (step_dev, read as uint32) draws the same; on a
// vocabulary larger than the shared-memory sort, both the sorted-prefix and the whole-row paths.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "harness_util.h"
#include "sample.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
struct Case {
    float temperature;
    int64_t top_k;
    float top_p;
};

// The kernel's ids for B rows of V logits, the same under two schedules.
IVec draw(const Vec& logits, int64_t B, int64_t V, const mtk::SampleParams& sp, const char* what) {
    return two_schedules(what, [&] {
        FVec l = to_f32(logits);
        IVec ids(B, -1);
        std::vector<uint64_t> scratch(mtk::sample_scratch_bytes(B, V) / sizeof(uint64_t), 7);
        mtk::sample(nullptr, ids.data(), l.data(), B, V, sp, scratch.data());
        return ids;
    });
}

// The reference's ids for case c with Philox (seed, step).
IVec reference(const Vec& logits, int64_t B, int64_t V, const Case& c, uint64_t seed,
               uint64_t step) {
    moetrain::SampleArgs sa;
    sa.temperature = c.temperature;
    sa.top_k = c.top_k;
    sa.top_p = c.top_p;
    sa.seed = seed;
    sa.step = step;
    IVec want(B);
    ref::sample(want, logits, B, V, sa);
    return want;
}
}  // namespace

TEST_CASE("simt: sample greedy and stochastic") {
    const Case cases[] = {{0, 0, 1},       {1, 0, 1},    {0.7f, 5, 1},
                          {1.3f, 0, 0.9f}, {1, 3, 0.5f}, {2, 1, 1}};
    for (auto [B, V] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {4, 300}, {2, 1100}}) {
        CAPTURE(B);
        CAPTURE(V);
        Rng rng(static_cast<uint64_t>(B * 10 + V));
        const Vec logits = rng.grid(B * V, -8, 8, 0.25);  // ties for greedy and for the sort
        for (const Case& c : cases) {
            if (V > 1000 && c.top_k != 0) continue;  // the large vocabulary: fewer cases (time)
            for (uint64_t step : {uint64_t(0), uint64_t(12345)}) {
                CAPTURE(c.temperature);
                CAPTURE(c.top_k);
                CAPTURE(c.top_p);
                CAPTURE(step);
                mtk::SampleParams sp{c.temperature, c.top_k, c.top_p, 42, step};
                moetrain::test::check_equal(draw(logits, B, V, sp, "sample"),
                                            reference(logits, B, V, c, 42, step), "sampled ids");
                // The step from the device: all of it (12345 fits), or the host step with the
                // device value -1, read as uint32 0xffffffff: step + 2^32 - 1.
                for (int32_t dev : {static_cast<int32_t>(step), int32_t{-1}}) {
                    if (c.temperature == 0 || V > 1000) break;  // no draw / time
                    CAPTURE(dev);
                    const int32_t step_dev[1] = {dev};
                    mtk::SampleParams dp = sp;
                    dp.step = dev == -1 ? step : 0;
                    dp.step_dev = step_dev;
                    moetrain::test::check_equal(
                        draw(logits, B, V, dp, "sample (device step)"),
                        reference(logits, B, V, c, 42, step + (dev == -1 ? 0xffffffffull : 0)),
                        "sampled ids (device step)");
                }
            }
        }
    }
}

// A vocabulary larger than kSampleFast: top-k up to it, a nucleus inside it, and a draw without
// top-p that lands among the kSampleFast most probable tokens are decided by their shared-memory
// sort (after a radix select); a nucleus wider than kSampleFast and a draw in the tail sort the
// whole row. Every draw must be the reference's token, and the flat rows must draw on both
// sides of the sorted prefix.
TEST_CASE("simt: sample over a vocabulary larger than the shared-memory sort") {
    const int64_t B = 2, V = 3000;
    static_assert(V > mtk::kSampleFast);
    Rng rng(77);
    const Vec logits = rng.grid(B * V, -8, 8, 0.25);  // ties within and across the paths' cut
    // How many tokens top-p keeps in row 0 at this temperature (the reference's rule).
    auto nucleus = [&](float temperature, float top_p) {
        std::vector<double> p(logits.begin(), logits.begin() + V);
        const double mx = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (double& x : p) sum += (x = std::exp((x - mx) / temperature));
        std::sort(p.begin(), p.end(), std::greater<>());
        double cum = 0;
        for (int64_t i = 0; i < V; ++i) {
            cum += p[static_cast<size_t>(i)] / sum;
            if (cum >= top_p) return i + 1;
        }
        return V;
    };
    // Where a token of row b stands in the sorted order (p descending, id ascending).
    auto rank = [&](int64_t b, int32_t id) {
        const double* l = logits.data() + b * V;
        int64_t r = 0;
        for (int64_t j = 0; j < V; ++j) r += l[j] > l[id] || (l[j] == l[id] && j < id);
        return r;
    };
    const Case cases[] = {
        {1, 5, 1},                 // top-k: shared-memory sort
        {1, mtk::kSampleFast, 1},  // top-k at the limit
        {1, 2500, 1},              // top-k past it: the draw within the prefix
        {1, 0, 1},                 // plain temperature: the draw within the prefix
        {1, 0, 0.9f},              // a nucleus inside the sorted prefix
        {200, 0, 0.95f},           // a nucleus wider than it: the whole row
        {200, 1500, 0.95f},        // top-k first: the nucleus search stops at 1500
        {200, 0, 1},               // flat, plain: draws inside and past the prefix
        {200, 2600, 1},            // flat, top-k past the prefix: the same
    };
    CHECK(nucleus(1, 0.9f) < mtk::kSampleFast);
    CHECK(nucleus(200, 0.95f) > mtk::kSampleFast);
    int64_t in_prefix = 0, in_tail = 0;  // the flat rows' draws
    for (const Case& c : cases)
        for (uint64_t step = 1; step <= (c.temperature > 100 ? 3u : 1u); ++step) {
            CAPTURE(c.temperature);
            CAPTURE(c.top_k);
            CAPTURE(c.top_p);
            CAPTURE(step);
            const mtk::SampleParams sp{c.temperature, c.top_k, c.top_p, 7, step};
            const IVec got = draw(logits, B, V, sp, "sample");
            moetrain::test::check_equal(got, reference(logits, B, V, c, 7, step), "sampled ids");
            if (c.temperature > 100 && c.top_p >= 1)
                for (int64_t b = 0; b < B; ++b)
                    (rank(b, got[static_cast<size_t>(b)]) < mtk::kSampleFast ? in_prefix
                                                                             : in_tail)++;
        }
    CHECK(in_prefix > 0);
    CHECK(in_tail > 0);
}
