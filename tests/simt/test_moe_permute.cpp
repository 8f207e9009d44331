// Harness tests of kernels_cuda/moe_permute.cuh: the stable counting sort end to end (count
// kernel, the host stand-in of the cub scan, place kernel; several chunks, experts that receive
// no token, no tokens at all), row gather, weighted / unweighted combine (overwrite and
// accumulate; rows of 4k elements on the 16-byte path and at offsets that force the
// single-element path) and the combine backward with and without dw.
#include "harness_util.h"
#include "moe_permute.cuh"
// after the kernels:
#include "cuda/cub_scan.h"
#include "vector_paths.h"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
// The scan the sort runs between its kernels: the host implementation of the backend's cub
// wrapper (tests/simt/cudasim/host_cub_scan.cpp), the same interface the CUDA Device passes.
const mtk::ExclusiveScan kScan = moetrain::cuda::exclusive_sum_i32_scan();

// moe_sort's scratch (histogram, its scan, the scan's temporaries), 256-byte aligned like the
// backend's allocations and filled with -1 so that reads of unwritten entries show.
class SortScratch {
  public:
    SortScratch(int64_t slots, int64_t E)
        : scan_bytes_(kScan.temp_bytes(mtk::moe_sort_scan_items(slots, E))),
          buf_(mtk::moe_sort_scratch_bytes(slots, E, scan_bytes_) / 4 + 64, -1) {}
    size_t scan_bytes() const { return scan_bytes_; }
    void* data() {
        auto* p = buf_.data();
        while (reinterpret_cast<uintptr_t>(p) % 256 != 0) ++p;
        return p;
    }

  private:
    size_t scan_bytes_;
    IVec buf_;
};
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
        auto sorted = two_schedules("moe_sort", [&] {
            IVec counts(c.E, -1), row_token(slots + 1, -1), slot_row(slots + 1, -1);
            SortScratch scratch(slots, c.E);
            IVec err = {0, 0};
            mtk::moe_sort(nullptr, counts.data(), row_token.data(), slot_row.data(), topk.data(),
                          c.N, c.k, c.E, kScan, scratch.scan_bytes(), scratch.data(), err.data());
            CHECK(err[0] == 0);
            return std::make_tuple(counts, row_token, slot_row);
        });
        IVec wc(c.E), wrt(slots), wsr(slots);
        ref::moe_sort(wc, wrt, wsr, topk, c.N, c.k, c.E);
        moetrain::test::check_equal(std::get<0>(sorted), wc, "counts");
        moetrain::test::check_equal(std::get<1>(sorted), wrt, "row_token");
        moetrain::test::check_equal(std::get<2>(sorted), wsr, "slot_row");
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
