// Harness tests of kernels_cuda/loss.cuh: cross-entropy losses with ignored targets (-1), with
// and without the in-place gradient, on a vocabulary larger than one block's threads.
#include "harness_util.h"
#include "loss.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: loss cross_entropy and its gradient") {
    for (auto [N, V] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {6, 257}, {2, 9000}}) {
        CAPTURE(N);
        CAPTURE(V);
        Rng rng(static_cast<uint64_t>(N * 3 + V));
        Vec logits = rng.normal(N * V, 3.0);
        IVec targets = rng.ints(N, 0, static_cast<int32_t>(V - 1));
        if (N > 2) targets[1] = -1;  // ignored row
        for (float scale : {0.0f, 0.125f}) {
            CAPTURE(scale);
            auto got = two_schedules("cross_entropy", [&] {
                FVec l = to_f32(logits), losses(N, NAN);
                IVec err = {0, 0};
                mtk::cross_entropy(nullptr, losses.data(), l.data(), targets.data(), N, V, scale,
                                   err.data());
                CHECK(err[0] == 0);
                return std::make_pair(losses, l);
            });
            Vec wl(N), wg(N * V);
            ref::cross_entropy(wl, wg, logits, targets, N, V, scale);
            check_close(got.first, wl, Tol{1e-5, 2e-5}, "losses");
            check_close(got.second, scale == 0.0f ? logits : wg, Tol{1e-4, 1e-7},
                        "logits / gradient");
        }
    }
}

TEST_CASE("simt: loss target outside the vocabulary is reported") {
    FVec logits(2 * 4, 0.5f), losses(2, 0.0f);
    IVec targets = {4, -1}, err = {0, 0};
    mtk::cross_entropy(nullptr, losses.data(), logits.data(), targets.data(), 2, 4, 1.0f,
                       err.data());
    CHECK(err[0] == mtk::kErrTarget);
    CHECK(err[1] == 4);
    CHECK(std::isnan(losses[0]));
    CHECK(losses[1] == 0.0f);
}
