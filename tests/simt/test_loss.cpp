// Harness tests of kernels_cuda/loss.cuh: cross-entropy losses with ignored targets (-1), with
// and without the in-place gradient, on a vocabulary larger than one block's threads; the online
// softmax under rising, masked (-inf) and NaN logits.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

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

// The online softmax rescales a thread's running sum whenever a larger logit arrives: rising
// logits rescale at every column, and masked columns (-inf) contribute nothing, even before a
// thread has seen a finite value.
TEST_CASE("simt: loss cross_entropy with rising and masked logits") {
    const int64_t N = 3, V = 5000;
    Vec logits(N * V);
    for (int64_t c = 0; c < V; ++c) {
        logits[c] = -20.0 + 40.0 * static_cast<double>(c) / static_cast<double>(V);  // rising
        logits[V + c] = c % 3 == 0 ? -INFINITY : std::sin(0.01 * static_cast<double>(c));
        logits[2 * V + c] = c < V - 7 ? -INFINITY : 0.5 * static_cast<double>(c % 4);
    }
    IVec targets = {static_cast<int32_t>(V - 1), 4, static_cast<int32_t>(V - 3)};
    auto got = two_schedules("cross_entropy masked", [&] {
        FVec l = to_f32(logits), losses(N, NAN);
        IVec err = {0, 0};
        mtk::cross_entropy(nullptr, losses.data(), l.data(), targets.data(), N, V, 1.0f,
                           err.data());
        CHECK(err[0] == 0);
        return std::make_pair(losses, l);
    });
    Vec wl(N), wg(N * V);
    ref::cross_entropy(wl, wg, logits, targets, N, V, 1.0);
    check_close(got.first, wl, Tol{1e-5, 2e-5}, "losses");
    check_close(got.second, wg, Tol{1e-4, 1e-7}, "gradient");
}

TEST_CASE("simt: loss cross_entropy of a row with a NaN logit is NaN") {
    for (int64_t at : {0, 5, 299}) {  // first column a thread sees, a later one, the last
        CAPTURE(at);
        FVec logits(2 * 300, 0.25f), losses(2, 0.0f);
        logits[static_cast<size_t>(300 + at)] = NAN;
        IVec targets = {1, 2}, err = {0, 0};
        mtk::cross_entropy(nullptr, losses.data(), logits.data(), targets.data(), 2, 300, 0.0f,
                           err.data());
        CHECK(std::abs(losses[0] - std::log(300.0f)) < 1e-5f);
        CHECK(std::isnan(losses[1]));
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

// Rows with V % 4 == 0 starting 16-byte aligned take the float4 path, others the one-by-one
// path over the same quads: a row placed one float off gives the same bits, and both match the
// reference.
TEST_CASE("simt: loss cross_entropy gives the same bits on the float4 and one-by-one paths") {
    const int64_t N = 3, V = 1000;
    Rng rng(515);
    const Vec logits = rng.normal(N * V, 2.0);
    IVec targets = {3, -1, 999};
    auto run = [&](size_t offset) {
        FVec buf(offset + static_cast<size_t>(N * V) + 4, 0.0f), losses(N, NAN);
        const FVec l = to_f32(logits);
        std::copy(l.begin(), l.end(), buf.begin() + static_cast<std::ptrdiff_t>(offset));
        IVec err = {0, 0};
        mtk::cross_entropy(nullptr, losses.data(), buf.data() + offset, targets.data(), N, V, 0.5f,
                           err.data());
        CHECK(err[0] == 0);
        return std::make_pair(losses,
                              FVec(buf.begin() + static_cast<std::ptrdiff_t>(offset),
                                   buf.begin() + static_cast<std::ptrdiff_t>(offset) + N * V));
    };
    // FVec's storage is 16-byte aligned (operator new): offset 0 takes float4, 1 does not.
    const uint64_t before = simt::vector_accesses();
    const auto vec = run(0);
    const uint64_t after = simt::vector_accesses();
    const auto single = run(1);
    CHECK(after > before);                    // the float4 path ran
    CHECK(simt::vector_accesses() == after);  // the one-by-one path made no vector access
    CHECK(vec.first == single.first);
    CHECK(vec.second == single.second);
    Vec wl(N), wg(N * V);
    ref::cross_entropy(wl, wg, logits, targets, N, V, 0.5);
    check_close(vec.first, wl, Tol{1e-5, 2e-5}, "losses");
    check_close(vec.second, wg, Tol{1e-4, 1e-7}, "gradient");
}

// The gradient into a separate bf16 / f16 row (mixed-precision training's dlogits16): the bits
// of the in-place f32 gradient rounded, with the logits left as they were, on the vector path
// (both rows aligned) and the one-by-one one (the 16-bit row one element off); the losses are
// those of the in-place run.
TEST_CASE("simt: loss cross_entropy writes a 16-bit gradient as the rounded in-place one") {
    const int64_t N = 3, V = 1000;
    Rng rng(616);
    const FVec logits = to_f32(rng.normal(N * V, 2.0));
    IVec targets = {7, -1, 999}, err = {0, 0};
    FVec in_place = logits, want_losses(N, NAN);
    mtk::cross_entropy(nullptr, want_losses.data(), in_place.data(), targets.data(), N, V, 0.25f,
                       err.data());
    for (auto kind : {mtk::FloatKind::bf16, mtk::FloatKind::f16}) {
        for (size_t offset : {size_t{0}, size_t{1}}) {
            CAPTURE(static_cast<int>(kind));
            CAPTURE(offset);
            FVec l = logits, losses(N, NAN);
            std::vector<uint16_t> grad(offset + static_cast<size_t>(N * V), 0);
            const uint64_t before = simt::vector_accesses();
            mtk::cross_entropy(nullptr, losses.data(), l.data(), targets.data(), N, V, 0.25f,
                               err.data(), grad.data() + offset, kind);
            CHECK((simt::vector_accesses() != before) == (offset == 0));
            CHECK(err[0] == 0);
            CHECK(l == logits);
            CHECK(losses == want_losses);
            const std::vector<uint16_t> got(grad.begin() + static_cast<std::ptrdiff_t>(offset),
                                            grad.end());
            CHECK(got == rounded16(in_place, kind == mtk::FloatKind::bf16));
        }
    }
}
