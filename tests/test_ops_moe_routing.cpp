// Op tests, the MODEL.md v2 routing options on every backend against the float64 reference
// (the router ops' sigmoid / bias / scaling cases are in test_ops_moe.cpp): the expert bias in
// the selection only; moe_capacity (slot-then-token
// priority, capacity 0, capacity above every load, offsets from other ranks, a bad index);
// moe_capacity_shares (R ranks' admission with the summed shares equals the global one);
// moe_sort, moe_combine and moe_combine_bwd with dropped selections (-1); add_counts and the
// float64 expert_bias_update, whose fp32 results must match bit for bit.
#include <algorithm>
#include <cstring>

#include "test_ops_moe_checks.h"
#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

TEST_CASE("ops: the expert bias decides the selection, never the weights") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        // One token, equal logits: without a bias experts 0, 1 win (ties to the lower index);
        // the bias moves the choice to experts 3 then 2; weights stay the (equal) scores.
        Tensor tl = to_device(dev, ref::Vec{0, 0, 0, 0}), tp = zeros(dev, 4), tlse = zeros(dev, 1);
        Tensor tidx = zeros(dev, 2, DType::i32), tw = zeros(dev, 2);
        RouterArgs ra;
        ra.sigmoid = true;
        ra.norm_topk = false;
        ra.scaling = 3.0f;
        dev.router_fwd(tp, tlse, tidx, tw, tl, to_device(dev, ref::Vec{0, 0, 0.25, 0.5}), 1, 4, 2,
                       ra);
        check_equal(from_device_i32(dev, tidx), {3, 2}, "biased selection");
        check_close(from_device(dev, tw), {1.5, 1.5}, Tol{0, 0}, "weights sigmoid(0) * 3");
        dev.router_fwd(tp, tlse, tidx, tw, tl, Tensor{}, 1, 4, 2, ra);
        check_equal(from_device_i32(dev, tidx), {0, 1}, "unbiased ties to the lower index");
    }
}

TEST_CASE("ops: moe_capacity admits slot by slot, then token by token") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        struct Case {
            int64_t N, k, E, capacity;
            ref::IVec idx, offsets;
        };
        Rng rng(12);
        std::vector<Case> cases = {
            // Token 1's first choice (expert 0) beats token 0's second choice (expert 0).
            {2, 2, 3, 1, {1, 0, 0, 2}, {}},
            {3, 2, 2, 0, {0, 1, 1, 0, 0, 1}, {}},        // capacity 0 drops everything
            {4, 2, 4, 8, {0, 1, 0, 1, 0, 1, 0, 1}, {}},  // capacity above every load
            {5, 1, 2, 2, {1, 1, 1, 0, 1}, {}},
            // Other ranks already admitted 1 selection of expert 1 before slot 0 and 2 of
            // expert 0 before slot 1.
            {3, 2, 2, 2, {1, 0, 1, 0, 0, 1}, {0, 1, 2, 0}},
            {300, 3, 16, 60, {}, {}},
            {257, 2, 5, 100, {}, {}},
        };
        cases[5].idx = rng.ints(900, 0, 15);
        cases[6].idx = rng.ints(514, 0, 2);  // three experts overloaded, two idle
        cases[6].offsets = rng.ints(10, 0, 40);
        for (const Case& c : cases) {
            CAPTURE(c.N);
            CAPTURE(c.k);
            CAPTURE(c.E);
            CAPTURE(c.capacity);
            const int64_t nk = c.N * c.k;
            Tensor tkept = to_device(dev, ref::IVec(static_cast<size_t>(nk), 99));
            Tensor tc = to_device(dev, ref::IVec(static_cast<size_t>(c.E), 99));
            dev.moe_capacity(tkept, tc, to_device(dev, c.idx),
                             c.offsets.empty() ? Tensor{} : to_device(dev, c.offsets), c.N, c.k,
                             c.E, c.capacity);
            ref::IVec kept(static_cast<size_t>(nk)), counts(static_cast<size_t>(c.E));
            ref::moe_capacity(kept, counts, c.idx, c.offsets, c.N, c.k, c.E, c.capacity);
            check_equal(from_device_i32(dev, tkept), kept, "moe_capacity kept_idx");
            check_equal(from_device_i32(dev, tc), counts, "moe_capacity counts (before dropping)");
        }
        check_equal(
            [&] {
                ref::IVec kept(4), counts(3);
                ref::moe_capacity(kept, counts, {1, 0, 0, 2}, {}, 2, 2, 3, 1);
                return kept;
            }(),
            {1, -1, 0, 2}, "the reference's priority order");
        Tensor t = zeros(dev, 8, DType::i32);
        CHECK_THROWS_AS(
            (dev.moe_capacity(t, t, to_device(dev, ref::IVec{0, 7}), Tensor{}, 2, 1, 4, 1),
             dev.synchronize()),
            Error);
    }
}

TEST_CASE("ops: moe_capacity_shares over R ranks admit as one process on the global batch") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        struct Case {
            int64_t R, N, k, E, capacity;
        };
        uint64_t seed = 77;
        for (const Case& c : {Case{2, 3, 2, 3, 2}, Case{4, 5, 2, 4, 3}, Case{3, 300, 3, 16, 60},
                              Case{2, 257, 2, 5, 110}, Case{1, 9, 2, 3, 4}, Case{4, 1, 1, 2, 1}}) {
            CAPTURE(c.R);
            CAPTURE(c.N);
            CAPTURE(c.k);
            CAPTURE(c.E);
            Rng rng(seed++);
            const int64_t nk = c.N * c.k, kE = c.k * c.E;
            // Skewed: expert 0 twice as likely, so the capacity drops.
            ref::IVec global = rng.ints(c.R * nk, -1, static_cast<int>(c.E) - 1);
            for (int32_t& e : global) e = std::max(e, 0);
            ref::IVec offsets(static_cast<size_t>(c.R * kE), 0);
            for (int64_t r = 0; r < c.R; ++r) {  // each rank's shares, summed (reduce-scatter)
                const ref::IVec mine(global.begin() + r * nk, global.begin() + (r + 1) * nk);
                Tensor ts = to_device(dev, ref::IVec(static_cast<size_t>(c.R * kE), 99));
                dev.moe_capacity_shares(ts, to_device(dev, mine), c.N, c.k, c.E, r, c.R);
                ref::IVec want(static_cast<size_t>(c.R * kE));
                ref::moe_capacity_shares(want, mine, c.N, c.k, c.E, r, c.R);
                const ref::IVec got = from_device_i32(dev, ts);
                check_equal(got, want, "moe_capacity_shares");
                for (size_t i = 0; i < got.size(); ++i) offsets[i] += got[i];
            }
            // Every rank admits its rows with its offsets: together, the single process's
            // admission of the global micro-batch (the ranks' rows in rank order).
            ref::IVec kept_all, want_kept(static_cast<size_t>(c.R * nk)),
                want_counts(static_cast<size_t>(c.E));
            for (int64_t r = 0; r < c.R; ++r) {
                const ref::IVec mine(global.begin() + r * nk, global.begin() + (r + 1) * nk);
                const ref::IVec off(offsets.begin() + r * kE, offsets.begin() + (r + 1) * kE);
                Tensor tkept = zeros(dev, nk, DType::i32), tc = zeros(dev, c.E, DType::i32);
                dev.moe_capacity(tkept, tc, to_device(dev, mine), to_device(dev, off), c.N, c.k,
                                 c.E, c.capacity);
                const ref::IVec kept = from_device_i32(dev, tkept);
                kept_all.insert(kept_all.end(), kept.begin(), kept.end());
            }
            ref::moe_capacity(want_kept, want_counts, global, {}, c.R * c.N, c.k, c.E, c.capacity);
            check_equal(kept_all, want_kept, "R ranks' admission vs the global micro-batch's");
            if (c.capacity < nk)
                CHECK(std::count(want_kept.begin(), want_kept.end(), -1) > 0);  // it drops
        }
        Tensor t = zeros(dev, 8, DType::i32);
        CHECK_THROWS_AS((dev.moe_capacity_shares(t, to_device(dev, ref::IVec{0, 7}), 2, 1, 4, 0, 2),
                         dev.synchronize()),
                        Error);
        CHECK_THROWS_AS(dev.moe_capacity_shares(t, to_device(dev, ref::IVec{0, 1}), 2, 1, 4, 2, 2),
                        Error);  // rank outside 0..ranks-1
    }
}

TEST_CASE("ops: moe_sort, moe_combine and moe_combine_bwd skip dropped selections") {
    const auto cases = {MoeCase{1, 1, 1, 3, 0}, MoeCase{7, 2, 4, 33, 2}, MoeCase{33, 3, 8, 65, 5},
                        MoeCase{64, 1, 5, 16, 3}, MoeCase{300, 2, 4, 8, 100}};
    for_each_moe_case(cases, 41, [](Device& dev, const MoeCase& c, Rng& rng) {
        const auto [N, k, E, dim, capacity] = c;
        const int64_t nk = N * k;
        const ref::IVec idx =
            spread_selections(c, [](int64_t n) { return n * (n % 3 == 0 ? 1 : 2); });
        ref::IVec kept(static_cast<size_t>(nk)), chosen(static_cast<size_t>(E));
        ref::moe_capacity(kept, chosen, idx, {}, N, k, E, capacity);

        const MoeSorted sorted = check_moe_sort(dev, kept, N, k, E, "moe_sort counts (admitted)");
        const ref::IVec& slot_row = sorted.slot_row;
        const Tensor& tsr = sorted.device_slot_row;

        auto expert_out = rng.normal(nk * dim), w = rng.uniform(nk, 0.0, 1.0),
             y0 = rng.normal(N * dim), dy = rng.normal(N * dim);
        Tensor teo = to_device(dev, expert_out), tw = to_device(dev, w);
        check_moe_combine(dev, {expert_out, w, teo, tw}, slot_row, tsr, y0, N, k, dim);
        for (bool weighted : {true, false}) {
            CAPTURE(weighted);
            // Rows no admitted selection owns keep what was there (nothing writes them).
            const ref::Vec marker(static_cast<size_t>(nk * dim), 7.0);
            Tensor tdr = to_device(dev, marker), tdw = to_device(dev, ref::Vec(nk, 5.0));
            dev.moe_combine_bwd(tdr, tdw, to_device(dev, dy), teo, tsr, weighted ? tw : Tensor{}, N,
                                k, dim);
            ref::Vec dr = marker, dw(static_cast<size_t>(nk));
            ref::moe_combine_bwd(dr, dw, dy, expert_out, slot_row, weighted ? w : ref::Vec{}, N, k,
                                 dim);
            check_close(from_device(dev, tdr), dr, Tol{}, "moe_combine_bwd drows");
            check_close(from_device(dev, tdw), dw, Tol{}, "moe_combine_bwd dw (0 if dropped)");
        }
    });
}

TEST_CASE("ops: add_counts and the float64 expert_bias_update") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        Device& dev = *d.dev;
        Tensor acc = to_device(dev, ref::IVec{1, 2, 3, 4, 5});
        dev.add_counts(acc, to_device(dev, ref::IVec{10, 0, -3, 7, 100}), 4);
        check_equal(from_device_i32(dev, acc), {11, 2, 0, 11, 5}, "add_counts");

        Rng rng(3);
        for (int64_t E : {1, 2, 7, 64, 300}) {
            CAPTURE(E);
            for (double rate : {1e-3, 0.1, 1.0 / 3.0, 0.0}) {
                CAPTURE(rate);
                // Values whose fp32 sums with the rate round differently in fp32 and float64.
                ref::Vec bias = rng.uniform(E, -0.05, 0.05);
                bias[0] = 0.1f;
                ref::IVec counts = rng.ints(E, 0, 20);
                if (E > 2) counts[1] = counts[2];  // equal loads
                Tensor tb = to_device(dev, bias);
                dev.expert_bias_update(tb, to_device(dev, counts), E, rate);
                ref::expert_bias_update(bias, counts, E, rate);
                const std::vector<double> got = from_device(dev, tb);
                for (int64_t e = 0; e < E; ++e) {
                    const float g = static_cast<float>(got[e]), w = static_cast<float>(bias[e]);
                    CAPTURE(e);
                    CHECK(std::memcmp(&g, &w, sizeof g) == 0);
                }
            }
        }
        // Every expert at the mean (sign 0) leaves the bias alone.
        Tensor tb = to_device(dev, ref::Vec{0.5, -0.25, 0.125});
        dev.expert_bias_update(tb, to_device(dev, ref::IVec{4, 4, 4}), 3, 0.01);
        check_close(from_device(dev, tb), {0.5, -0.25, 0.125}, Tol{0, 0}, "balanced: unchanged");
    }
}
