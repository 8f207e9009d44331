// Harness tests of kernels_cuda/moe_permute.cuh: the stable counting sort (several chunks,
// experts that receive no token, no tokens at all), row gather, weighted / unweighted combine
// (overwrite and accumulate) and the combine backward with and without dw.
#include "harness_util.h"
#include "moe_permute.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: moe_permute sort, gather, combine, combine backward") {
    struct Case {
        int64_t N, k, E, dim;
    };
    for (Case c : {Case{1, 1, 1, 1}, Case{7, 2, 16, 5}, Case{300, 2, 6, 9}, Case{40, 3, 300, 33}, Case{0, 2, 4, 3}}) {
        CAPTURE(c.N);
        CAPTURE(c.k);
        CAPTURE(c.E);
        const int64_t slots = c.N * c.k;
        Rng rng(static_cast<uint64_t>(c.N * 7 + c.E));
        // Skewed routing: the upper half of the experts gets nothing when E > 2.
        IVec topk = rng.ints(slots, 0, static_cast<int32_t>(c.E > 2 ? c.E / 2 - 1 : c.E - 1));
        auto sorted = two_schedules("moe_sort", [&] {
            IVec counts(c.E, -1), row_token(slots + 1, -1), slot_row(slots + 1, -1);
            IVec scratch(mtk::moe_sort_scratch_bytes(slots, c.E) / sizeof(int32_t) + 1, -1);
            IVec err = {0, 0};
            mtk::moe_sort(nullptr, counts.data(), row_token.data(), slot_row.data(), topk.data(), c.N,
                          c.k, c.E, scratch.data(), err.data());
            CHECK(err[0] == 0);
            return std::make_tuple(counts, row_token, slot_row);
        });
        IVec wc(c.E), wrt(slots), wsr(slots);
        ref::moe_sort(wc, wrt, wsr, topk, c.N, c.k, c.E);
        moetrain::test::check_equal(std::get<0>(sorted), wc, "counts");
        moetrain::test::check_equal(std::get<1>(sorted), wrt, "row_token");
        moetrain::test::check_equal(std::get<2>(sorted), wsr, "slot_row");
        if (slots == 0) continue;

        Vec x = rng.normal(c.N * c.dim), w = rng.uniform(slots, 0.0, 1.0), y0 = rng.normal(c.N * c.dim);
        Vec dy = rng.normal(c.N * c.dim);
        auto gathered = two_schedules("gather_rows", [&] {
            FVec fx = to_f32(x), rows(slots * c.dim);
            mtk::gather_rows(nullptr, rows.data(), fx.data(), c.N, wrt.data(), slots, c.dim, nullptr);
            return rows;
        });
        Vec rows(slots * c.dim);
        ref::gather_rows(rows, x, wrt, slots, c.dim);
        check_close(gathered, rows, Tol{0, 0}, "gather_rows");

        for (bool weighted : {false, true}) {
            for (bool acc : {false, true}) {
                CAPTURE(weighted);
                CAPTURE(acc);
                auto got = two_schedules("moe_combine", [&] {
                    FVec y = to_f32(y0), fr = to_f32(rows), fw = to_f32(w);
                    mtk::moe_combine(nullptr, y.data(), fr.data(), slots, wsr.data(),
                                     weighted ? fw.data() : nullptr, c.N, c.k, c.dim, acc, nullptr);
                    return y;
                });
                Vec want = y0;
                ref::moe_combine(want, rows, wsr, weighted ? w : Vec{}, c.N, c.k, c.dim, acc);
                check_close(got, want, Tol{1e-5, 1e-6}, "moe_combine");
            }
            for (bool with_dw : {false, true}) {
                CAPTURE(with_dw);
                auto got = two_schedules("moe_combine_bwd", [&] {
                    FVec drows(slots * c.dim, NAN), dw(slots, -3.0f), fdy = to_f32(dy), fr = to_f32(rows),
                        fw = to_f32(w);
                    mtk::moe_combine_bwd(nullptr, drows.data(), with_dw ? dw.data() : nullptr, fdy.data(),
                                         fr.data(), slots, wsr.data(), weighted ? fw.data() : nullptr, c.N,
                                         c.k, c.dim, nullptr);
                    return std::make_pair(drows, dw);
                });
                Vec wdr(slots * c.dim), wdw(with_dw ? slots : 0);
                ref::moe_combine_bwd(wdr, wdw, dy, rows, wsr, weighted ? w : Vec{}, c.N, c.k, c.dim);
                check_close(got.first, wdr, Tol{1e-6, 0}, "drows");
                check_close(got.second, with_dw ? wdw : Vec(slots, -3.0), Tol{1e-5, 1e-6}, "dw");
            }
        }
    }
}

TEST_CASE("simt: moe_permute indices outside their range are skipped and reported") {
    IVec err = {0, 0};
    IVec topk = {0, 5, 1}, counts(4), row_token(3, -1), slot_row(3, -1);
    IVec scratch(mtk::moe_sort_scratch_bytes(3, 4) / sizeof(int32_t));
    mtk::moe_sort(nullptr, counts.data(), row_token.data(), slot_row.data(), topk.data(), 3, 1, 4,
                  scratch.data(), err.data());
    CHECK(err[0] == mtk::kErrSortExpert);
    CHECK(err[1] == 5);
    CHECK(counts == IVec{1, 1, 0, 0});

    FVec src = {1, 2, 3, 4}, dst(4, -1.0f);  // 2 rows of dim 2
    IVec index = {1, 2};
    err = {0, 0};
    mtk::gather_rows(nullptr, dst.data(), src.data(), 2, index.data(), 2, 2, err.data());
    CHECK(err[0] == mtk::kErrGatherIndex);
    CHECK(err[1] == 2);
    CHECK(dst == FVec{3, 4, -1, -1});

    FVec rows = {1, 2, 3, 4}, y(2, 0.0f), dy = {1, 1}, drows(4, 0.0f), dw(2, 0.0f);
    IVec bad_rows = {1, -3};  // N = 1 token, k = 2 slots, dim 2
    err = {0, 0};
    mtk::moe_combine(nullptr, y.data(), rows.data(), 2, bad_rows.data(), nullptr, 1, 2, 2, false, err.data());
    CHECK(err[0] == mtk::kErrCombineRow);
    CHECK(y == FVec{3, 4});
    err = {0, 0};
    mtk::moe_combine_bwd(nullptr, drows.data(), dw.data(), dy.data(), rows.data(), 2, bad_rows.data(),
                         nullptr, 1, 2, 2, err.data());
    CHECK(err[0] == mtk::kErrCombineBwdRow);
    CHECK(err[1] == -3);
    CHECK(dw[0] == 7.0f);
}
