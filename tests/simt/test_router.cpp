// Harness tests of kernels_cuda/router.cuh: softmax top-k forward (exact ties broken to the
// lower expert, E above and below a warp), backward with and without renormalisation, the aux /
// z loss terms, and hash routing.
#include "harness_util.h"
#include "router.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
struct RouterCase {
    int64_t N, E, k;
};
const RouterCase kCases[] = {{1, 1, 1}, {5, 4, 2}, {9, 8, 8}, {33, 40, 3}, {6, 67, 16}};
}  // namespace

TEST_CASE("simt: router forward and backward, aux and z loss") {
    for (RouterCase c : kCases) {
        for (bool norm : {false, true}) {
            CAPTURE(c.N);
            CAPTURE(c.E);
            CAPTURE(c.k);
            CAPTURE(norm);
            Rng rng(static_cast<uint64_t>(c.N * 100 + c.E * 10 + c.k + norm));
            Vec logits = rng.grid(c.N * c.E, -3, 3, 0.5);  // coarse grid: many exact ties
            auto fwd = two_schedules("router_fwd", [&] {
                FVec fl = to_f32(logits), probs(c.N * c.E), lse(c.N), w(c.N * c.k);
                IVec idx(c.N * c.k, -7);
                mtk::router_fwd(nullptr, probs.data(), lse.data(), idx.data(), w.data(), fl.data(),
                                c.N, c.E, c.k, norm);
                return std::make_tuple(probs, lse, idx, w);
            });
            Vec wp(c.N * c.E), wl(c.N), ww(c.N * c.k);
            IVec wi(c.N * c.k);
            // The softmax router without bias or scaling (what the kernel runs).
            moetrain::RouterArgs ra;
            ra.norm_topk = norm;
            ref::router_fwd(wp, wl, wi, ww, logits, Vec{}, c.N, c.E, c.k, ra);
            check_close(std::get<0>(fwd), wp, Tol{1e-5, 1e-7}, "probs");
            check_close(std::get<1>(fwd), wl, Tol{1e-5, 1e-6}, "lse");
            moetrain::test::check_equal(std::get<2>(fwd), wi, "topk_idx");
            check_close(std::get<3>(fwd), ww, Tol{1e-5, 1e-7}, "topk_w");

            // Backward from the forward results, with expert counts as the model computes them.
            const auto& [probs, lse, idx, w] = fwd;
            IVec counts(c.E, 0);
            for (int32_t e : idx) counts[e]++;
            Vec dw = rng.normal(c.N * c.k);
            const float aux_alpha = 0.01f, z_alpha = 0.001f, scale = 0.5f;
            auto bwd = two_schedules("router_bwd", [&] {
                FVec dl(c.N * c.E, NAN), fdw = to_f32(dw), out = {0.5f, 0.25f};
                IVec err = {0, 0};
                mtk::router_bwd(nullptr, dl.data(), fdw.data(), probs.data(), lse.data(),
                                idx.data(), w.data(), counts.data(), c.N, c.E, c.k, norm, aux_alpha,
                                z_alpha, scale, err.data());
                CHECK(err[0] == 0);
                mtk::router_aux_loss(nullptr, out.data(), probs.data(), lse.data(), counts.data(),
                                     c.N, c.E, c.k, aux_alpha, z_alpha);
                return std::make_pair(dl, out);
            });
            Vec wdl(c.N * c.E), wout = {0.5, 0.25};
            ref::router_bwd(wdl, dw, to_f64(probs), to_f64(lse), logits, idx, to_f64(w), counts,
                            c.N, c.E, c.k, ra, aux_alpha, z_alpha, scale);
            ref::router_aux_loss(wout, to_f64(probs), to_f64(lse), counts, c.N, c.E, c.k, ra,
                                 aux_alpha, z_alpha);
            check_close(bwd.first, wdl, Tol{1e-4, 1e-6}, "dlogits");
            check_close(bwd.second, wout, Tol{1e-5, 1e-7}, "aux, z");
        }
    }
}

TEST_CASE("simt: router hash routing") {
    for (int64_t N : {int64_t(1), int64_t(257)}) {
        for (int64_t E : {int64_t(1), int64_t(7), int64_t(64)}) {
            Rng rng(static_cast<uint64_t>(N + E));
            IVec ids = rng.ints(N, 0, 50000);
            auto got = two_schedules("hash_route", [&] {
                IVec idx(N, -1);
                mtk::hash_route(nullptr, idx.data(), ids.data(), N, 3, E);
                return idx;
            });
            IVec want(N);
            ref::hash_route(want, ids, N, 3, E);
            moetrain::test::check_equal(got, want, "hash_route");
        }
    }
}

TEST_CASE("simt: router_bwd reports an expert index outside [0, E)") {
    FVec dl(4, 0.0f), dw = {1.0f}, probs = {0.25f, 0.25f, 0.25f, 0.25f}, lse = {0.0f}, w = {1.0f};
    IVec idx = {9}, counts = {1, 0, 0, 0}, err = {0, 0};
    mtk::router_bwd(nullptr, dl.data(), dw.data(), probs.data(), lse.data(), idx.data(), w.data(),
                    counts.data(), 1, 4, 1, false, 0.0f, 0.0f, 1.0f, err.data());
    CHECK(err[0] == mtk::kErrRouterExpert);
    CHECK(err[1] == 9);
}
