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

namespace {
// Forward (on logits of a coarse grid: many exact ties) and backward of one router case under
// the harness, against the float64 reference. bias_grid: draw an expert bias on a grid too (so
// that score + bias ties as well); zero_dw: one selection's weight gradient is 0 (a dropped
// selection, still in the renormalisation sum).
void check_router(const RouterCase& c, const moetrain::RouterArgs& r, bool bias_grid, bool zero_dw,
                  uint64_t seed) {
    Rng rng(seed);
    Vec logits = rng.grid(c.N * c.E, -3, 3, 0.5);
    Vec dw = rng.normal(c.N * c.k);
    if (zero_dw && c.N * c.k > 1) dw[1] = 0;
    const Vec bias = bias_grid ? rng.grid(c.E, -2, 2, 0.25) : Vec{};
    const FVec fbias = to_f32(bias);
    const mtk::RouterOpts o{r.sigmoid, r.norm_topk, r.scaling, nullptr};
    auto fwd = two_schedules("router_fwd", [&] {
        FVec fl = to_f32(logits), probs(c.N * c.E), lse(c.N), w(c.N * c.k);
        IVec idx(c.N * c.k, -7);
        mtk::RouterOpts ob = o;
        ob.bias = bias_grid ? fbias.data() : nullptr;
        mtk::router_fwd(nullptr, probs.data(), lse.data(), idx.data(), w.data(), fl.data(), c.N,
                        c.E, c.k, ob);
        return std::make_tuple(probs, lse, idx, w);
    });
    Vec wp(c.N * c.E), wl(c.N), ww(c.N * c.k);
    IVec wi(c.N * c.k);
    ref::router_fwd(wp, wl, wi, ww, logits, bias, c.N, c.E, c.k, r);
    check_close(std::get<0>(fwd), wp, Tol{1e-5, 1e-7}, "probs");
    check_close(std::get<1>(fwd), wl, Tol{1e-5, 1e-6}, "lse");
    moetrain::test::check_equal(std::get<2>(fwd), wi, "topk_idx");
    check_close(std::get<3>(fwd), ww, Tol{1e-5, 1e-7}, "topk_w");

    // Backward from the forward results, with expert counts as the model computes them.
    const auto& [probs, lse, idx, w] = fwd;
    IVec counts(c.E, 0);
    for (int32_t e : idx) counts[e]++;
    const float aux_alpha = 0.01f, z_alpha = 0.001f, scale = 0.5f;
    auto bwd = two_schedules("router_bwd", [&] {
        FVec dl(c.N * c.E, NAN), fdw = to_f32(dw), out = {0.5f, 0.25f};
        FVec fl = to_f32(logits);
        IVec err = {0, 0};
        mtk::router_bwd(nullptr, dl.data(), fdw.data(), probs.data(), lse.data(), fl.data(),
                        idx.data(), w.data(), counts.data(), c.N, c.E, c.k, o, aux_alpha, z_alpha,
                        scale, err.data());
        CHECK(err[0] == 0);
        FVec scratch(mtk::aux_scratch_bytes(c.N) / sizeof(float), NAN);
        mtk::router_aux_loss(nullptr, out.data(), probs.data(), lse.data(), counts.data(), c.N, c.E,
                             c.k, r.sigmoid, aux_alpha, z_alpha, scratch.data());
        return std::make_pair(dl, out);
    });
    Vec wdl(c.N * c.E), wout = {0.5, 0.25};
    ref::router_bwd(wdl, dw, to_f64(probs), to_f64(lse), logits, idx, to_f64(w), counts, c.N, c.E,
                    c.k, r, aux_alpha, z_alpha, scale);
    ref::router_aux_loss(wout, to_f64(probs), to_f64(lse), counts, c.N, c.E, c.k, r, aux_alpha,
                         z_alpha);
    check_close(bwd.first, wdl, Tol{1e-4, 1e-6}, "dlogits");
    check_close(bwd.second, wout, Tol{1e-5, 1e-7}, "aux, z");
}
}  // namespace

TEST_CASE("simt: router forward and backward, aux and z loss") {
    for (RouterCase c : kCases) {
        for (bool norm : {false, true}) {
            CAPTURE(c.N);
            CAPTURE(c.E);
            CAPTURE(c.k);
            CAPTURE(norm);
            moetrain::RouterArgs r;
            r.norm_topk = norm;
            check_router(c, r, false, false,
                         static_cast<uint64_t>(c.N * 100 + c.E * 10 + c.k + norm));
        }
    }
}

// The softmax aux loss sums each expert's column: side by side in the block while E fits its
// threads (E dividing the block or not), one column per thread beyond it; the sigmoid one sums
// rows with a warp each. Rows in one block of the first pass, and in twelve.
TEST_CASE("simt: router aux and z loss on wide and narrow expert counts, over several blocks") {
    for (bool sigmoid : {false, true})
        for (int64_t E : {int64_t(1), int64_t(5), int64_t(64), int64_t(256), int64_t(300)}) {
            for (int64_t N : {int64_t(1), int64_t(7), int64_t(1000), int64_t(3000)}) {
                if (N > 1000 && E > 5) continue;  // time
                CAPTURE(sigmoid);
                CAPTURE(E);
                CAPTURE(N);
                const int64_t k = E < 2 ? 1 : 2;
                Rng rng(static_cast<uint64_t>(N * 1000 + E));
                const Vec probs = rng.uniform(N * E, 0.01, 1.0), lse = rng.normal(N);
                const IVec counts = rng.ints(E, 0, static_cast<int32_t>(N * k));
                const FVec fprobs = to_f32(probs), flse = to_f32(lse);
                auto got = two_schedules("router_aux_loss", [&] {
                    FVec out = {0.5f, 0.25f};
                    FVec scratch(mtk::aux_scratch_bytes(N) / sizeof(float), NAN);
                    mtk::router_aux_loss(nullptr, out.data(), fprobs.data(), flse.data(),
                                         counts.data(), N, E, k, sigmoid, 0.01f, 0.001f,
                                         scratch.data());
                    return out;
                });
                Vec want = {0.5, 0.25};
                moetrain::RouterArgs r;
                r.sigmoid = sigmoid;
                ref::router_aux_loss(want, probs, lse, counts, N, E, k, r, 0.01, 0.001);
                check_close(got, want, Tol{1e-5, 1e-7}, "aux, z");
            }
        }
    CHECK(mtk::aux_blocks(1000) == 4);
    CHECK(mtk::aux_blocks(3000) == 12);
    CHECK(mtk::aux_blocks(int64_t{1} << 20) == 1024);  // 1024-row chunks
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
    mtk::router_bwd(nullptr, dl.data(), dw.data(), probs.data(), lse.data(), dl.data(), idx.data(),
                    w.data(), counts.data(), 1, 4, 1, mtk::RouterOpts{false, false}, 0.0f, 0.0f,
                    1.0f, err.data());
    CHECK(err[0] == mtk::kErrRouterExpert);
    CHECK(err[1] == 9);
}

TEST_CASE("simt: router sigmoid scores, expert bias and routed scaling") {
    struct Mode {
        bool sigmoid, bias;
        float scaling;
    };
    for (RouterCase c : kCases) {
        for (Mode m : {Mode{true, false, 1.0f}, Mode{true, true, 2.5f}, Mode{false, true, 0.5f}}) {
            for (bool norm : {false, true}) {
                CAPTURE(c.N);
                CAPTURE(c.E);
                CAPTURE(c.k);
                CAPTURE(m.sigmoid);
                CAPTURE(m.bias);
                CAPTURE(norm);
                moetrain::RouterArgs r;
                r.sigmoid = m.sigmoid;
                r.norm_topk = norm;
                r.scaling = m.scaling;
                check_router(
                    c, r, m.bias, true,
                    static_cast<uint64_t>(c.N * 100 + c.E * 10 + c.k + norm + 7 * m.sigmoid));
            }
        }
    }
}
