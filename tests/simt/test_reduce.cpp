// Harness tests of kernels_cuda/reduce.cuh: sum and sum of squares (accumulate or not, n = 0
// included) and the bias gradient (column sums over several row chunks, the last one partial;
// the 16-byte and single-element paths on aligned, offset and mismatched arguments); and the
// column sums' chunking (launch.h).
#include "harness_util.h"
#include "reduce.cuh"
// after the kernels:
#include "vector_paths.h"

using namespace simt_test;
namespace ref = moetrain::ref;

TEST_CASE("simt: reduce sum, sum_squares") {
    std::vector<int64_t> sizes = moetrain::test::awkward_sizes();
    sizes.push_back(0);
    sizes.push_back(70001);  // several partial blocks
    for (int64_t n : sizes) {
        CAPTURE(n);
        Rng rng(static_cast<uint64_t>(n) + 11);
        Vec x = rng.normal(n);
        const Tol tol{1e-5, 1e-6 * std::sqrt(static_cast<double>(n) + 1.0) * 4};
        for (bool acc : {false, true}) {
            CAPTURE(acc);
            auto got = two_schedules("sum", [&] {
                FVec fx = to_f32(x), out = {0.25f}, out2 = {0.5f};
                FVec scratch(mtk::reduce_scratch_bytes(n) / sizeof(float) + 1, NAN);
                mtk::sum(nullptr, out.data(), fx.data(), n, -0.5f, acc, scratch.data());
                mtk::sum_squares(nullptr, out2.data(), fx.data(), n, acc, scratch.data());
                return std::make_pair(out, out2);
            });
            Vec want = {0.25}, want2 = {0.5};
            ref::sum(want, x, n, -0.5, acc);
            ref::sum_squares(want2, x, n, acc);
            check_close(got.first, want, tol, "sum");
            check_close(got.second, want2, Tol{1e-5, 1e-5}, "sum_squares");
        }
    }
}

TEST_CASE("simt: reduce bias_grad") {
    // 66000 x 4: chunks of 64 rows (1032, the last of 16).
    const Shapes shapes = {{1, 1},   {3, 7},    {65, 33},   {130, 257},
                           {1, 300}, {33, 128}, {200, 260}, {66000, 4}};
    for_each_shape(shapes, 7, [&](int64_t rows, int64_t cols, Rng& rng) {
        Vec dy = rng.normal(rows * cols), db0 = rng.normal(cols);
        auto got = two_schedules("bias_grad", [&] {
            FVec db = to_f32(db0), fdy = to_f32(dy);
            FVec scratch(mtk::colsum_scratch_bytes(rows, cols) / sizeof(float), NAN);
            mtk::bias_grad(nullptr, db.data(), fdy.data(), rows, cols, scratch.data());
            return db;
        });
        Vec want = db0;
        ref::bias_grad(want, dy, rows, cols);
        check_close(got, want, Tol{1e-5, 1e-5}, "bias_grad");
    });
}

// dy at the first offset, dbias at the other, the partials aligned. The first pass reads dy four
// columns at a time when cols % 4 == 0 and dy is aligned; the second reads the partials and
// updates dbias so when dbias is aligned; with a single chunk one pass needs both.
TEST_CASE("simt: reduce bias_grad on aligned, offset and mismatched arguments") {
    for (auto [rows, cols] :
         {std::pair<int64_t, int64_t>{3, 8}, {3, 7}, {130, 64}, {130, 3}, {45, 260}, {90, 1027}}) {
        CAPTURE(rows);
        CAPTURE(cols);
        const bool chunked = mtk::colsum_chunks(rows, cols) > 1;
        auto vectors = [&](const Placement& p) {
            if (cols % 4 != 0) return false;
            const bool dy = p.first % 4 == 0, db = p.rest % 4 == 0;
            return chunked ? dy || db : dy && db;
        };
        Rng rng(static_cast<uint64_t>(rows * 13 + cols));
        Vec dy = rng.normal(rows * cols), db0 = rng.normal(cols);
        auto got = across_placements(
            "bias_grad",
            [&](const Placement& p) {
                Placed<float> fdy(to_f32(dy), p.first), db(to_f32(db0), p.rest);
                Placed<float> scratch(
                    FVec(mtk::colsum_scratch_bytes(rows, cols) / sizeof(float), NAN), 0);
                mtk::bias_grad(nullptr, db.data(), fdy.data(), rows, cols, scratch.data());
                return db.values();
            },
            vectors);
        Vec want = db0;
        ref::bias_grad(want, dy, rows, cols);
        check_close(got, want, Tol{1e-5, 1e-5}, "bias_grad");
    }
}

// Chunks: powers of two >= 32 rows; the first pass fills an H100 (at least 2^18 threads) when
// the rows allow and stays within kColsumMaxThreads; the partials stay small whatever the size.
TEST_CASE("simt: reduce column-sum chunking") {
    auto threads = [](int64_t rows, int64_t cols) {
        return mtk::colsum_chunks(rows, cols) * mtk::ceil_div(cols, 128) * mtk::kColsumBlock;
    };
    CHECK(mtk::colsum_rows_per_chunk(16384, 768) == 64);
    CHECK(mtk::colsum_rows_per_chunk(16384, 3072) == 256);
    CHECK(mtk::colsum_rows_per_chunk(16384, 2304) == 256);
    CHECK(mtk::colsum_rows_per_chunk(10, 768) == 32);
    CHECK(mtk::colsum_scratch_bytes(10, 768) == 0);  // one chunk: no partials
    for (int64_t rows : {int64_t{100}, int64_t{16384}, int64_t{65536}, int64_t{1} << 22})
        for (int64_t cols : {int64_t{1}, int64_t{5}, int64_t{768}, int64_t{3072}, int64_t{50304}}) {
            CAPTURE(rows);
            CAPTURE(cols);
            const int64_t per = mtk::colsum_rows_per_chunk(rows, cols);
            CHECK(per >= 32);
            CHECK((per & (per - 1)) == 0);
            CHECK(threads(rows, cols) <= mtk::kColsumMaxThreads);
            if (per > 32) CHECK(threads(rows, cols) >= mtk::kColsumMaxThreads / 2);
            CHECK(mtk::norm_bwd_scratch_bytes(rows, cols) <= size_t{2} << 20);
        }
}

// A dy stored in bf16 / f16 (the model's rounded gradient): the sums of its values widened, bit
// for bit those of the f32 widening, on the vector path (aligned) and the one-by-one one.
TEST_CASE("simt: reduce bias_grad of a 16-bit dy equals that of its f32 widening") {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 7}, {130, 256}, {200, 260}}) {
        CAPTURE(rows);
        CAPTURE(cols);
        Rng rng(static_cast<uint64_t>(rows + cols));
        const FVec dy = to_f32(rng.normal(rows * cols)), db0 = to_f32(rng.normal(cols));
        for (auto kind : {mtk::FloatKind::bf16, mtk::FloatKind::f16}) {
            const bool bf16 = kind == mtk::FloatKind::bf16;
            const std::vector<uint16_t> h = rounded16(dy, bf16);
            FVec wide(h.size());
            for (size_t i = 0; i < h.size(); ++i)
                wide[i] = bf16 ? moetrain::bf16_to_f32(h[i]) : moetrain::f16_to_f32(h[i]);
            FVec scratch(mtk::colsum_scratch_bytes(rows, cols) / sizeof(float), NAN);
            FVec want = db0;
            mtk::bias_grad(nullptr, want.data(), wide.data(), rows, cols, scratch.data());
            for (size_t offset : {size_t{0}, size_t{1}}) {
                CAPTURE(offset);
                std::vector<uint16_t> placed(offset, 0);
                placed.insert(placed.end(), h.begin(), h.end());
                const FVec got = two_schedules("bias_grad 16-bit", [&] {
                    FVec db = db0;
                    mtk::bias_grad(nullptr, db.data(), placed.data() + offset, rows, cols,
                                   scratch.data(), kind);
                    return db;
                });
                CHECK(got == want);
            }
        }
    }
}
