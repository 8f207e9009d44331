// Harness tests of kernels_cuda/moe_balance.cuh: capacity admission in priority order (slot j,
// then token n) against the float64 reference, over several chunks of the priority order,
// capacities from 0 to more than any expert receives, with and without the other ranks'
// offsets, and no tokens at all; an expert index outside [0, E) reported; the expert-count
// accumulator; the float64 expert-bias update (counts above, at and below the mean); the
// data-parallel offset shares (several ranks, more ranks than threads, no tokens).
#include "harness_util.h"
#include "moe_balance.cuh"
// after the kernels:
#include "sort_scratch.h"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: moe_capacity admits in slot-then-token order") {
    struct Case {
        int64_t N, k, E, capacity;
        bool offsets;
    };
    for (Case c : {Case{1, 1, 1, 0, false}, Case{9, 2, 4, 3, false}, Case{300, 2, 8, 70, false},
                   Case{300, 2, 8, 70, true}, Case{130, 3, 40, 5, true},
                   Case{200, 4, 6, 1000, false}, Case{0, 2, 4, 3, false}}) {
        CAPTURE(c.N);
        CAPTURE(c.k);
        CAPTURE(c.E);
        CAPTURE(c.capacity);
        CAPTURE(c.offsets);
        const int64_t slots = c.N * c.k;
        Rng rng(static_cast<uint64_t>(c.N * 13 + c.E + c.capacity));
        // Skewed routing (the lower experts get most selections), each token's k distinct.
        IVec topk(slots);
        for (int64_t n = 0; n < c.N; ++n)
            for (int64_t j = 0; j < c.k; ++j)
                topk[n * c.k + j] =
                    static_cast<int32_t>((rng.integer(0, static_cast<int32_t>(c.E / 2)) + j) % c.E);
        IVec offsets = c.offsets ? rng.ints(c.k * c.E, 0, 20) : IVec{};
        auto got = two_schedules("moe_capacity", [&] {
            IVec kept(slots + 1, -7), counts(c.E, -7), err = {0, 0};
            SortScratch scratch(slots, c.E);
            mtk::moe_capacity(nullptr, kept.data(), counts.data(), topk.data(),
                              c.offsets ? offsets.data() : nullptr, c.N, c.k, c.E, c.capacity,
                              kScan, scratch.scan_bytes(), scratch.data(), err.data());
            CHECK(err[0] == 0);
            CHECK(kept[slots] == -7);  // nothing written past the selections
            kept.pop_back();
            return std::make_pair(kept, counts);
        });
        IVec want_kept(slots), want_counts(c.E);
        ref::moe_capacity(want_kept, want_counts, topk, offsets, c.N, c.k, c.E, c.capacity);
        moetrain::test::check_equal(got.first, want_kept, "kept_idx");
        moetrain::test::check_equal(got.second, want_counts, "counts");
    }
}

TEST_CASE("simt: moe_capacity reports an expert index outside [0, E)") {
    IVec topk = {0, 4, 1, -1}, kept(4, -7), counts(4), err = {0, 0};
    SortScratch scratch(4, 4);
    mtk::moe_capacity(nullptr, kept.data(), counts.data(), topk.data(), nullptr, 4, 1, 4, 8, kScan,
                      scratch.scan_bytes(), scratch.data(), err.data());
    CHECK(err[0] == mtk::kErrCapacityExpert);
    CHECK((err[1] == 4 || err[1] == -1));
    CHECK(kept == IVec{0, -1, 1, -1});
    CHECK(counts == IVec{1, 1, 0, 0});
}

TEST_CASE("simt: moe_capacity_shares against the reference") {
    struct Case {
        int64_t N, k, E, rank, ranks;
    };
    for (Case c : {Case{1, 1, 1, 0, 1}, Case{9, 2, 4, 1, 2}, Case{600, 2, 8, 2, 4},
                   Case{130, 3, 40, 0, 3}, Case{0, 2, 4, 1, 2}, Case{70, 1, 3, 5, 300}}) {
        CAPTURE(c.N);
        CAPTURE(c.k);
        CAPTURE(c.E);
        CAPTURE(c.rank);
        CAPTURE(c.ranks);
        const int64_t slots = c.N * c.k, n = c.ranks * c.k * c.E;
        Rng rng(static_cast<uint64_t>(c.N * 7 + c.E + c.ranks));
        const IVec topk = rng.ints(slots, 0, static_cast<int32_t>(c.E - 1));
        auto got = two_schedules("moe_capacity_shares", [&] {
            IVec shares(n + 1, -7), err = {0, 0};
            mtk::moe_capacity_shares(nullptr, shares.data(), topk.data(), c.N, c.k, c.E, c.rank,
                                     c.ranks, err.data());
            CHECK(err[0] == 0);
            CHECK(shares[n] == -7);  // nothing written past the shares
            shares.pop_back();
            return shares;
        });
        IVec want(n);
        ref::moe_capacity_shares(want, topk, c.N, c.k, c.E, c.rank, c.ranks);
        moetrain::test::check_equal(got, want, "shares");
    }
    IVec topk = {0, 4, 1, 2}, shares(8), err = {0, 0};
    mtk::moe_capacity_shares(nullptr, shares.data(), topk.data(), 4, 1, 4, 0, 2, err.data());
    CHECK(err[0] == mtk::kErrCapacityExpert);
    CHECK(err[1] == 4);
}

TEST_CASE("simt: add_counts and expert_bias_update") {
    for (int64_t E : {int64_t(1), int64_t(5), int64_t(300)}) {
        CAPTURE(E);
        Rng rng(static_cast<uint64_t>(E));
        IVec acc = rng.ints(E, 0, 50), counts = rng.ints(E, 0, 50);
        if (E > 2) counts[1] = counts[0];  // equal counts: one may sit at the mean
        auto summed = two_schedules("add_counts", [&] {
            IVec a = acc;
            mtk::add_counts(nullptr, a.data(), counts.data(), E);
            return a;
        });
        IVec want = acc;
        ref::add_counts(want, counts, E);
        moetrain::test::check_equal(summed, want, "add_counts");

        // Counts whose mean some expert equals exactly (sign 0), the others above and below.
        IVec c(E);
        for (int64_t e = 0; e < E; ++e) c[e] = static_cast<int32_t>(10 + (e % 3) - 1);
        Vec bias = to_f64(to_f32(rng.normal(E)));
        const double rate = 1e-3;
        auto updated = two_schedules("expert_bias_update", [&] {
            FVec b = to_f32(bias);
            mtk::expert_bias_update(nullptr, b.data(), c.data(), E, rate);
            return b;
        });
        Vec want_b = bias;
        ref::expert_bias_update(want_b, c, E, rate);
        check_close(updated, want_b, Tol{0, 0}, "bias");  // float64 math, one fp32 rounding
    }
}
