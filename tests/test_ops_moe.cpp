// Op tests, MoE routing: router_fwd (ties in the logits go to the lower expert, k = 1 .. E,
// with and without renormalisation, softmax and sigmoid scores, expert bias, routed scaling),
// router_bwd and router_aux_loss (load-balancing and z-loss terms), hash_route, moe_sort (experts
// with no tokens, one token per expert), gather_rows, moe_combine and moe_combine_bwd (weighted /
// unweighted, accumulate, dw empty). Index outputs must match exactly; floats within rel 1e-4, abs
// 1e-5.
#include <numeric>

#include "test_ops_moe_checks.h"
#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {
// sigmoid: sigmoid scores; bias: an expert bias on a coarse grid (the keys' ties stay exact in
// fp32 and float64 alike); scaling: the routed scaling.
struct RouterCase {
    int64_t N, E, k;
    bool norm;
    bool sigmoid = false, bias = false;
    float scaling = 1.0f;
};
const RouterCase kRouterCases[] = {
    {1, 1, 1, true},
    {7, 4, 2, true},
    {33, 8, 2, false},
    {65, 6, 6, true},
    {100, 16, 1, true},
    {5, 3, 2, false},
    {7, 4, 2, true, true},
    {33, 8, 2, false, true, true, 2.5f},
    {65, 6, 6, true, true, true},
    {100, 16, 4, true, false, true, 0.5f},
    {5, 3, 2, false, false, true, 2.0f},
    {1, 1, 1, true, true, true},
};
}  // namespace

TEST_CASE("ops: router_fwd router_bwd router_aux_loss with tied logits") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        uint64_t seed = 21;
        for (const RouterCase& c : kRouterCases) {
            CAPTURE(c.N);
            CAPTURE(c.E);
            CAPTURE(c.k);
            CAPTURE(c.norm);
            CAPTURE(c.sigmoid);
            CAPTURE(c.bias);
            Rng rng(seed++);
            auto logits = rng.grid(c.N * c.E, -4, 4, 0.5);  // coarse grid: many exact ties
            const ref::Vec bias = c.bias ? rng.grid(c.E, -2, 2, 0.125) : ref::Vec{};
            const int64_t nk = c.N * c.k;
            Tensor tl = to_device(dev, logits), tp = zeros(dev, c.N * c.E), tlse = zeros(dev, c.N);
            Tensor tidx = zeros(dev, nk, DType::i32), tw = zeros(dev, nk);
            RouterArgs ra;
            ra.sigmoid = c.sigmoid;
            ra.norm_topk = c.norm;
            ra.scaling = c.scaling;
            dev.router_fwd(tp, tlse, tidx, tw, tl, c.bias ? to_device(dev, bias) : Tensor{}, c.N,
                           c.E, c.k, ra);
            ref::Vec p(static_cast<size_t>(c.N * c.E)), lse(static_cast<size_t>(c.N)),
                w(static_cast<size_t>(nk));
            ref::IVec idx(static_cast<size_t>(nk));
            ref::router_fwd(p, lse, idx, w, logits, bias, c.N, c.E, c.k, ra);
            check_close(from_device(dev, tp), p, Tol{}, "router probs");
            check_close(from_device(dev, tlse), lse, Tol{}, "router lse");
            check_equal(from_device_i32(dev, tidx), idx, "router topk_idx");
            check_close(from_device(dev, tw), w, Tol{}, "router topk_w");

            ref::IVec counts(static_cast<size_t>(c.E)), row_token(static_cast<size_t>(nk)),
                slot_row(static_cast<size_t>(nk));
            ref::moe_sort(counts, row_token, slot_row, idx, c.N, c.k, c.E);
            Tensor tcounts = to_device(dev, counts);
            const float aux_alpha = 0.01f, z_alpha = 0.001f, scale = 0.5f;
            auto dtw = rng.normal(nk);
            if (c.bias) dtw[0] = 0.0f;  // a dropped selection's weight gradient
            Tensor tdl = zeros(dev, c.N * c.E);
            dev.router_bwd(tdl, to_device(dev, dtw), tp, tlse, tl, tidx, tw, tcounts, c.N, c.E, c.k,
                           ra, aux_alpha, z_alpha, scale);
            ref::Vec dl(p.size());
            ref::router_bwd(dl, dtw, p, lse, logits, idx, w, counts, c.N, c.E, c.k, ra, aux_alpha,
                            z_alpha, scale);
            check_close(from_device(dev, tdl), dl, Tol{}, "router dlogits");

            ref::Vec out{0.25, -0.5};  // accumulates onto what is there
            Tensor tout = to_device(dev, out);
            dev.router_aux_loss(tout, tp, tlse, tcounts, c.N, c.E, c.k, ra, aux_alpha, z_alpha);
            ref::router_aux_loss(out, p, lse, counts, c.N, c.E, c.k, ra, aux_alpha, z_alpha);
            check_close(from_device(dev, tout), out, Tol{}, "router aux / z loss");
        }
    }
}

TEST_CASE("ops: router_fwd rejects top_k > n_experts") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        Tensor t = zeros(dev, 64), ti = zeros(dev, 64, DType::i32);
        CHECK_THROWS_AS(dev.router_fwd(t, t, ti, t, t, Tensor{}, 2, 3, 4, RouterArgs{}), Error);
    }
}

TEST_CASE("ops: hash_route") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        Rng rng(4);
        auto ids = rng.ints(257, 0, 50000);
        ids[0] = 0;
        for (int64_t layer : {0, 1, 7})
            for (int64_t E : {1, 3, 8, 64}) {
                CAPTURE(layer);
                CAPTURE(E);
                Tensor tidx = zeros(dev, 257, DType::i32);
                dev.hash_route(tidx, to_device(dev, ids), 257, layer, E);
                ref::IVec want(257);
                ref::hash_route(want, ids, 257, layer, E);
                check_equal(from_device_i32(dev, tidx), want, "hash_route");
            }
    }
}

TEST_CASE("ops: moe_sort with empty experts and one token per expert") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        struct Case {
            int64_t N, k, E;
            ref::IVec idx;
        };
        Rng rng(9);
        std::vector<Case> cases = {
            {1, 1, 1, {0}},
            {4, 1, 4, {3, 2, 1, 0}},                    // one token per expert, reversed
            {3, 2, 8, {7, 0, 7, 0, 0, 7}},              // experts 1..6 get nothing
            {5, 2, 5, {4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},  // everything to the last expert
            {100, 2, 16, {}},
        };
        cases.back().idx = rng.ints(200, 0, 15);
        for (auto& c : cases) {
            CAPTURE(c.N);
            CAPTURE(c.E);
            check_moe_sort(dev, c.idx, c.N, c.k, c.E, "moe_sort counts");
        }
        Tensor t = zeros(dev, 8, DType::i32);
        // Thrown by the op or (cuda: no host wait inside an MoE layer) by the next synchronize.
        CHECK_THROWS_AS(
            (dev.moe_sort(t, t, t, to_device(dev, ref::IVec{0, 5}), 2, 1, 4), dev.synchronize()),
            Error);
    }
}

TEST_CASE("ops: gather_rows moe_combine moe_combine_bwd") {
    const auto cases = {MoeCase{1, 1, 1, 1, 0}, MoeCase{7, 2, 4, 33, 0}, MoeCase{33, 3, 8, 65, 0},
                        MoeCase{64, 1, 5, 16, 0}};
    for_each_moe_case(cases, 31, [](Device& dev, const MoeCase& c, Rng& rng) {
        const auto [N, k, E, dim, capacity] = c;
        const int64_t nk = N * k;
        const ref::IVec idx = spread_selections(c, [](int64_t n) { return n; });
        ref::IVec counts(static_cast<size_t>(E)), row_token(static_cast<size_t>(nk)),
            slot_row(static_cast<size_t>(nk));
        ref::moe_sort(counts, row_token, slot_row, idx, N, k, E);
        auto x = rng.normal(N * dim);
        Tensor tx = to_device(dev, x), trows = zeros(dev, nk * dim);
        dev.gather_rows(trows, tx, to_device(dev, row_token), nk, dim);
        ref::Vec rows(static_cast<size_t>(nk * dim));
        ref::gather_rows(rows, x, row_token, nk, dim);
        check_close(from_device(dev, trows), rows, Tol{0, 0}, "gather_rows");

        auto expert_out = rng.normal(nk * dim), w = rng.uniform(nk, 0.0, 1.0),
             y0 = rng.normal(N * dim);
        Tensor teo = to_device(dev, expert_out), tsr = to_device(dev, slot_row),
               tw = to_device(dev, w);
        check_moe_combine(dev, {expert_out, w, teo, tw}, slot_row, tsr, y0, N, k, dim);
        auto dy = rng.normal(N * dim);
        for (bool weighted : {true, false})
            for (bool want_dw : {true, false}) {
                CAPTURE(weighted);
                CAPTURE(want_dw);
                Tensor tdr = zeros(dev, nk * dim), tdw = zeros(dev, nk);
                dev.moe_combine_bwd(tdr, want_dw ? tdw : Tensor{}, to_device(dev, dy), teo, tsr,
                                    weighted ? tw : Tensor{}, N, k, dim);
                ref::Vec dr(static_cast<size_t>(nk * dim)),
                    dw = want_dw ? ref::Vec(static_cast<size_t>(nk)) : ref::Vec{};
                ref::moe_combine_bwd(dr, dw, dy, expert_out, slot_row, weighted ? w : ref::Vec{}, N,
                                     k, dim);
                check_close(from_device(dev, tdr), dr, Tol{}, "moe_combine_bwd drows");
                if (want_dw) check_close(from_device(dev, tdw), dw, Tol{}, "moe_combine_bwd dw");
            }
    });
}
