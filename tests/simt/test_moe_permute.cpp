// Harness tests of kernels_cuda/moe_permute.cuh: the stable counting sort end to end (count
// kernel, the host stand-in of the cub scan, place kernel; several chunks, experts that receive
// no token, no tokens at all), row gather, weighted / unweighted combine (overwrite and
// accumulate; rows of 4k elements on the 16-byte path and at offsets that force the
// single-element path) and the combine backward with and without dw.
#include "harness_util.h"
#include "moe_permute.cuh"
// after the kernels:
#include "sort_scratch.h"
#include "vector_paths.h"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
// moe_sort of topk under the harness against the float64 reference; returns the reference
// (row_token, slot_row).
std::pair<IVec, IVec> check_sort(const IVec& topk, int64_t N, int64_t k, int64_t E) {
    const int64_t slots = N * k;
    auto sorted = two_schedules("moe_sort", [&] {
        IVec counts(E, -1), row_token(slots + 1, -1), slot_row(slots + 1, -1);
        SortScratch scratch(slots, E);
        IVec err = {0, 0};
        mtk::moe_sort(nullptr, counts.data(), row_token.data(), slot_row.data(), topk.data(), N, k,
                      E, kScan, scratch.scan_bytes(), scratch.data(), err.data());
        CHECK(err[0] == 0);
        return std::make_tuple(counts, row_token, slot_row);
    });
    IVec wc(E), wrt(slots), wsr(slots);
    ref::moe_sort(wc, wrt, wsr, topk, N, k, E);
    moetrain::test::check_equal(std::get<0>(sorted), wc, "counts");
    moetrain::test::check_equal(std::get<1>(sorted), wrt, "row_token");
    moetrain::test::check_equal(std::get<2>(sorted), wsr, "slot_row");
    return {wrt, wsr};
}
}  // namespace

TEST_CASE("simt: moe_permute sort, gather, combine, combine backward") {
    struct Case {
        int64_t N, k, E, dim;
    };
    for (Case c : {Case{1, 1, 1, 1}, Case{7, 2, 16, 5}, Case{300, 2, 6, 9}, Case{40, 3, 300, 33},
                   Case{0, 2, 4, 3}, Case{700, 2, 64, 8}}) {
        CAPTURE(c.N);
        CAPTURE(c.k);
        CAPTURE(c.E);
        const int64_t slots = c.N * c.k;
        Rng rng(static_cast<uint64_t>(c.N * 7 + c.E));
        // Skewed routing: the upper half of the experts gets nothing when E > 2.
        IVec topk = rng.ints(slots, 0, static_cast<int32_t>(c.E > 2 ? c.E / 2 - 1 : c.E - 1));
        const auto [wrt, wsr] = check_sort(topk, c.N, c.k, c.E);
        if (slots == 0) continue;

        Vec x = rng.normal(c.N * c.dim), w = rng.uniform(slots, 0.0, 1.0),
            y0 = rng.normal(c.N * c.dim);
        Vec dy = rng.normal(c.N * c.dim);
        auto gathered = two_schedules("gather_rows", [&] {
            FVec fx = to_f32(x), rows(slots * c.dim);
            mtk::gather_rows(nullptr, rows.data(), fx.data(), c.N, wrt.data(), slots, c.dim,
                             nullptr);
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
                    FVec drows(slots * c.dim, NAN), dw(slots, -3.0f),
                        fdy = to_f32(dy), fr = to_f32(rows), fw = to_f32(w);
                    mtk::moe_combine_bwd(nullptr, drows.data(), with_dw ? dw.data() : nullptr,
                                         fdy.data(), fr.data(), slots, wsr.data(),
                                         weighted ? fw.data() : nullptr, c.N, c.k, c.dim, nullptr);
                    return std::make_pair(drows, dw);
                });
                Vec wdr(slots * c.dim), wdw(with_dw ? slots : 0);
                ref::moe_combine_bwd(wdr, wdw, dy, rows, wsr, weighted ? w : Vec{}, c.N, c.k,
                                     c.dim);
                check_close(got.first, wdr, Tol{1e-6, 0}, "drows");
                check_close(got.second, with_dw ? wdw : Vec(slots, -3.0), Tol{1e-5, 1e-6}, "dw");
            }
        }
    }
}

TEST_CASE("simt: moe_permute with selections dropped by capacity") {
    // Selections with expert -1 (moe_capacity's drops) get no row: slot_row -1, the rows past
    // the admitted total get row_token 0, the combine skips them and its backward writes no row
    // and dw 0. Several chunks, drops in every chunk, and a case where everything is dropped.
    struct Case {
        int64_t N, k, E, dim;
        int drop_every;  // every drop_every-th slot is dropped (1: all)
    };
    for (Case c : {Case{300, 2, 6, 5, 3}, Case{9, 3, 4, 8, 2}, Case{5, 2, 3, 4, 1}}) {
        CAPTURE(c.N);
        CAPTURE(c.drop_every);
        const int64_t slots = c.N * c.k;
        Rng rng(static_cast<uint64_t>(c.N + c.drop_every));
        IVec topk = rng.ints(slots, 0, static_cast<int32_t>(c.E - 1));
        for (int64_t s = 0; s < slots; s += c.drop_every) topk[s] = -1;
        const IVec wsr = check_sort(topk, c.N, c.k, c.E).second;

        Vec rows = rng.normal(slots * c.dim), w = rng.uniform(slots, 0.0, 1.0);
        Vec y0 = rng.normal(c.N * c.dim), dy = rng.normal(c.N * c.dim);
        auto combined = two_schedules("moe_combine", [&] {
            FVec y = to_f32(y0), fr = to_f32(rows), fw = to_f32(w);
            IVec err = {0, 0};
            mtk::moe_combine(nullptr, y.data(), fr.data(), slots, wsr.data(), fw.data(), c.N, c.k,
                             c.dim, true, err.data());
            CHECK(err[0] == 0);
            return y;
        });
        Vec want = y0;
        ref::moe_combine(want, rows, wsr, w, c.N, c.k, c.dim, true);
        check_close(combined, want, Tol{1e-5, 1e-6}, "moe_combine");
        auto back = two_schedules("moe_combine_bwd", [&] {
            FVec drows(slots * c.dim, 0.0f), dw(slots, -3.0f), fdy = to_f32(dy), fr = to_f32(rows),
                                                               fw = to_f32(w);
            IVec err = {0, 0};
            mtk::moe_combine_bwd(nullptr, drows.data(), dw.data(), fdy.data(), fr.data(), slots,
                                 wsr.data(), fw.data(), c.N, c.k, c.dim, err.data());
            CHECK(err[0] == 0);
            return std::make_pair(drows, dw);
        });
        Vec wdr(slots * c.dim, 0.0), wdw(slots);
        ref::moe_combine_bwd(wdr, wdw, dy, rows, wsr, w, c.N, c.k, c.dim);
        check_close(back.first, wdr, Tol{1e-6, 0}, "drows");
        check_close(back.second, wdw, Tol{1e-5, 1e-6}, "dw");
    }
}

TEST_CASE("simt: moe_permute gather and combine rows on aligned, offset and mismatched arguments") {
    const int64_t N = 37, k = 2, E = 5, slots = N * k;
    Rng rng(41);
    IVec topk = rng.ints(slots, 0, static_cast<int32_t>(E - 1));
    IVec counts(E), row_token(slots), slot_row(slots);
    ref::moe_sort(counts, row_token, slot_row, topk, N, k, E);
    for (int64_t dim : {int64_t(3), int64_t(4), int64_t(8), int64_t(33), int64_t(64)}) {
        CAPTURE(dim);
        Vec x = rng.normal(N * dim), w = rng.uniform(slots, 0.0, 1.0), y0 = rng.normal(N * dim);
        // Every row starts a group only when dim % 4 == 0 and both arguments are aligned.
        auto rows_vec = [&](const Placement& p) {
            return dim % 4 == 0 && p.first % 4 == 0 && p.rest % 4 == 0;
        };
        auto gathered = across_placements(
            "gather_rows",
            [&](const Placement& p) {
                Placed<float> dst(FVec(slots * dim, 0.0f), p.offset(0)),
                    src(to_f32(x), p.offset(1));
                mtk::gather_rows(nullptr, dst.data(), src.data(), N, row_token.data(), slots, dim,
                                 nullptr);
                return dst.values();
            },
            rows_vec);
        Vec rows(slots * dim);
        ref::gather_rows(rows, x, row_token, slots, dim);
        check_close(gathered, rows, Tol{0, 0}, "gather_rows");
        for (bool acc : {false, true}) {
            CAPTURE(acc);
            auto got = across_placements(
                "moe_combine",
                [&](const Placement& p) {
                    Placed<float> y(to_f32(y0), p.offset(0)), r(to_f32(rows), p.offset(1));
                    FVec fw = to_f32(w);
                    mtk::moe_combine(nullptr, y.data(), r.data(), slots, slot_row.data(), fw.data(),
                                     N, k, dim, acc, nullptr);
                    return y.values();
                },
                rows_vec);
            Vec want = y0;
            ref::moe_combine(want, rows, slot_row, w, N, k, dim, acc);
            check_close(got, want, Tol{1e-5, 1e-6}, "moe_combine");
        }
    }
}

TEST_CASE("simt: moe_permute indices outside their range are skipped and reported") {
    IVec err = {0, 0};
    IVec topk = {0, 5, 1}, counts(4), row_token(3, -1), slot_row(3, -1);
    SortScratch scratch(3, 4);
    mtk::moe_sort(nullptr, counts.data(), row_token.data(), slot_row.data(), topk.data(), 3, 1, 4,
                  kScan, scratch.scan_bytes(), scratch.data(), err.data());
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
    // The same on the 16-byte path: 2 aligned rows of dim 4.
    Placed<float> src4(FVec{1, 2, 3, 4, 5, 6, 7, 8}, 0), dst4(FVec(8, -1.0f), 0);
    err = {0, 0};
    const uint64_t vectors_before = simt::vector_accesses();
    mtk::gather_rows(nullptr, dst4.data(), src4.data(), 2, index.data(), 2, 4, err.data());
    CHECK(simt::vector_accesses() > vectors_before);
    CHECK(err[0] == mtk::kErrGatherIndex);
    CHECK(err[1] == 2);
    CHECK(dst4.values() == FVec{5, 6, 7, 8, -1, -1, -1, -1});

    FVec rows = {1, 2, 3, 4}, y(2, 0.0f), dy = {1, 1}, drows(4, 0.0f), dw(2, 0.0f);
    IVec bad_rows = {1, -3};  // N = 1 token, k = 2 slots, dim 2
    err = {0, 0};
    mtk::moe_combine(nullptr, y.data(), rows.data(), 2, bad_rows.data(), nullptr, 1, 2, 2, false,
                     err.data());
    CHECK(err[0] == mtk::kErrCombineRow);
    CHECK(y == FVec{3, 4});
    Placed<float> rows4(FVec{1, 2, 3, 4, 5, 6, 7, 8}, 0), y4(FVec(4, 0.0f), 0);  // dim 4
    err = {0, 0};
    mtk::moe_combine(nullptr, y4.data(), rows4.data(), 2, bad_rows.data(), nullptr, 1, 2, 4, false,
                     err.data());
    CHECK(err[0] == mtk::kErrCombineRow);
    CHECK(err[1] == -3);
    CHECK(y4.values() == FVec{5, 6, 7, 8});
    err = {0, 0};
    mtk::moe_combine_bwd(nullptr, drows.data(), dw.data(), dy.data(), rows.data(), 2,
                         bad_rows.data(), nullptr, 1, 2, 2, err.data());
    CHECK(err[0] == mtk::kErrCombineBwdRow);
    CHECK(err[1] == -3);
    CHECK(dw[0] == 7.0f);
}
