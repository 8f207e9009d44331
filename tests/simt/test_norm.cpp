// Harness tests of kernels_cuda/norm.cuh: RMSNorm and LayerNorm forward and backward (with and
// without LayerNorm bias, dx accumulated or overwritten) on awkward row lengths; and the passes
// that write y / dx with rows and gains aligned, at element offsets and mismatched (the 16-byte
// and the single-element paths, vector_paths.h).
#include "harness_util.h"
#include "norm.cuh"
// after the kernels:
#include "vector_paths.h"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1},    {3, 7},   {2, 33},
                                                          {130, 17}, {5, 257}, {2, 1023}};
const Tol kTol{2e-4, 2e-5};

// Whether a row pass gets groups of four: some row (starting at p.first + r * dim) agrees with
// the gain (at p.rest) on the alignment and is long enough past its head.
bool some_row_grouped(const Placement& p, int64_t rows, int64_t dim) {
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t start = p.first + r * dim;
        if (start % 4 == p.rest % 4 && dim - (4 - start % 4) % 4 >= 4) return true;
    }
    return false;
}
}  // namespace

TEST_CASE("simt: norm rmsnorm forward and backward") {
    for (auto [rows, dim] : kShapes) {
        CAPTURE(rows);
        CAPTURE(dim);
        Rng rng(static_cast<uint64_t>(rows * 31 + dim));
        Vec x = rng.normal(rows * dim), g = rng.uniform(dim, 0.5, 1.5), dy = rng.normal(rows * dim);
        Vec dx0 = rng.normal(rows * dim), dg0 = rng.normal(dim);
        auto fwd = two_schedules("rmsnorm_fwd", [&] {
            FVec y(rows * dim), rstd(rows), fx = to_f32(x), fg = to_f32(g);
            mtk::rmsnorm_fwd(nullptr, y.data(), rstd.data(), fx.data(), fg.data(), rows, dim,
                             1e-5f);
            return std::make_pair(y, rstd);
        });
        Vec wy(rows * dim), wr(rows);
        ref::rmsnorm_fwd(wy, wr, x, g, rows, dim, 1e-5);
        check_close(fwd.first, wy, kTol, "rmsnorm y");
        check_close(fwd.second, wr, kTol, "rmsnorm rstd");
        for (bool acc : {false, true}) {
            CAPTURE(acc);
            auto bwd = two_schedules("rmsnorm_bwd", [&] {
                FVec dx = to_f32(dx0), dg = to_f32(dg0), fdy = to_f32(dy), fx = to_f32(x),
                     fg = to_f32(g);
                FVec scratch(mtk::norm_bwd_scratch_bytes(rows, dim) / sizeof(float), NAN);
                mtk::rmsnorm_bwd(nullptr, dx.data(), dg.data(), fdy.data(), fx.data(), fg.data(),
                                 fwd.second.data(), rows, dim, acc, scratch.data());
                return std::make_pair(dx, dg);
            });
            Vec wdx = dx0, wdg = dg0;
            ref::rmsnorm_bwd(wdx, wdg, dy, x, g, to_f64(fwd.second), rows, dim, acc);
            check_close(bwd.first, wdx, kTol, "rmsnorm dx");
            check_close(bwd.second, wdg, kTol, "rmsnorm dg");
        }
    }
}

TEST_CASE("simt: norm layernorm forward and backward") {
    for (auto [rows, dim] : kShapes) {
        for (bool bias : {false, true}) {
            CAPTURE(rows);
            CAPTURE(dim);
            CAPTURE(bias);
            Rng rng(static_cast<uint64_t>(rows * 37 + dim + bias));
            Vec x = rng.normal(rows * dim, 2.0), g = rng.uniform(dim, 0.5, 1.5),
                b = rng.normal(dim);
            Vec dy = rng.normal(rows * dim), dx0 = rng.normal(rows * dim), dg0 = rng.normal(dim),
                db0 = rng.normal(dim);
            for (auto& v : x) v = static_cast<float>(v + 3.0);  // a mean far from 0
            Vec bvec = bias ? b : Vec{};
            auto fwd = two_schedules("layernorm_fwd", [&] {
                FVec y(rows * dim), mean(rows), rstd(rows), fx = to_f32(x), fg = to_f32(g),
                                                            fb = to_f32(b);
                mtk::layernorm_fwd(nullptr, y.data(), mean.data(), rstd.data(), fx.data(),
                                   fg.data(), bias ? fb.data() : nullptr, rows, dim, 1e-5f);
                return std::make_tuple(y, mean, rstd);
            });
            Vec wy(rows * dim), wm(rows), wr(rows);
            ref::layernorm_fwd(wy, wm, wr, x, g, bvec, rows, dim, 1e-5);
            check_close(std::get<0>(fwd), wy, kTol, "layernorm y");
            check_close(std::get<1>(fwd), wm, kTol, "layernorm mean");
            check_close(std::get<2>(fwd), wr, Tol{1e-3, 1e-4}, "layernorm rstd");
            for (bool acc : {false, true}) {
                CAPTURE(acc);
                auto bwd = two_schedules("layernorm_bwd", [&] {
                    FVec dx = to_f32(dx0), dg = to_f32(dg0), db = to_f32(db0);
                    FVec fdy = to_f32(dy), fx = to_f32(x), fg = to_f32(g);
                    FVec scratch(mtk::norm_bwd_scratch_bytes(rows, dim) / sizeof(float), NAN);
                    mtk::layernorm_bwd(nullptr, dx.data(), dg.data(), bias ? db.data() : nullptr,
                                       fdy.data(), fx.data(), fg.data(), std::get<1>(fwd).data(),
                                       std::get<2>(fwd).data(), rows, dim, acc, scratch.data());
                    return std::make_tuple(dx, dg, db);
                });
                Vec wdx = dx0, wdg = dg0, wdb = bias ? db0 : Vec{};
                ref::layernorm_bwd(wdx, wdg, wdb, dy, x, g, to_f64(std::get<1>(fwd)),
                                   to_f64(std::get<2>(fwd)), rows, dim, acc);
                check_close(std::get<0>(bwd), wdx, Tol{1e-3, 1e-4}, "layernorm dx");
                check_close(std::get<1>(bwd), wdg, Tol{1e-3, 1e-4}, "layernorm dg");
                check_close(std::get<2>(bwd), bias ? wdb : db0, kTol, "layernorm db");
            }
        }
    }
}

// The row tensors (x, y, dy, dx) start at the placement's first offset, the gain and bias at
// the other; a row gets groups when its start and the gain agree on the alignment (rows of
// odd length shift it row by row) and it is long enough past its head.
TEST_CASE("simt: norm output passes on aligned, offset and mismatched arguments") {
    for (auto [rows, dim] :
         {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {4, 64}, {5, 257}, {2, 1024}, {70, 68}}) {
        CAPTURE(rows);
        CAPTURE(dim);
        // The row passes: per row, where its start and the gain agree on the alignment; the
        // column sums of the gradients (dy and x at the first offset, dg / db aligned): when
        // every row of dy and x starts aligned.
        auto groups = [&](const Placement& p) {
            return (dim % 4 == 0 && p.first % 4 == 0) || some_row_grouped(p, rows, dim);
        };
        Rng rng(static_cast<uint64_t>(rows * 53 + dim));
        Vec x = rng.normal(rows * dim, 2.0), g = rng.uniform(dim, 0.5, 1.5), b = rng.normal(dim);
        Vec dy = rng.normal(rows * dim), dx0 = rng.normal(rows * dim);
        for (auto& v : x) v = static_cast<float>(v + 1.0);
        auto rms = across_placements(
            "rmsnorm",
            [&](const Placement& p) {
                Placed<float> y(FVec(rows * dim, 0.0f), p.first), fx(to_f32(x), p.first),
                    fg(to_f32(g), p.rest);
                Placed<float> dx(to_f32(dx0), p.first), fdy(to_f32(dy), p.first);
                FVec rstd(rows), dg(dim, 0.0f),
                    scratch(mtk::norm_bwd_scratch_bytes(rows, dim) / sizeof(float), NAN);
                mtk::rmsnorm_fwd(nullptr, y.data(), rstd.data(), fx.data(), fg.data(), rows, dim,
                                 1e-5f);
                mtk::rmsnorm_bwd(nullptr, dx.data(), dg.data(), fdy.data(), fx.data(), fg.data(),
                                 rstd.data(), rows, dim, true, scratch.data());
                return std::make_tuple(y.values(), rstd, dx.values(), dg);
            },
            groups);
        Vec wy(rows * dim), wr(rows), wdx = dx0, wdg(dim, 0.0);
        ref::rmsnorm_fwd(wy, wr, x, g, rows, dim, 1e-5);
        ref::rmsnorm_bwd(wdx, wdg, dy, x, g, to_f64(std::get<1>(rms)), rows, dim, true);
        check_close(std::get<0>(rms), wy, kTol, "rmsnorm y");
        check_close(std::get<2>(rms), wdx, kTol, "rmsnorm dx");
        check_close(std::get<3>(rms), wdg, kTol, "rmsnorm dg");

        auto ln = across_placements(
            "layernorm",
            [&](const Placement& p) {
                Placed<float> y(FVec(rows * dim, 0.0f), p.first), fx(to_f32(x), p.first);
                Placed<float> fg(to_f32(g), p.rest), fb(to_f32(b), p.rest),
                    dx(FVec(rows * dim, 0.0f), p.first), fdy(to_f32(dy), p.first);
                FVec mean(rows), rstd(rows), dg(dim, 0.0f), dg2(dim, 0.0f), db(dim, 0.0f),
                    scratch(mtk::norm_bwd_scratch_bytes(rows, dim) / sizeof(float), NAN);
                mtk::layernorm_fwd(nullptr, y.data(), mean.data(), rstd.data(), fx.data(),
                                   fg.data(), fb.data(), rows, dim, 1e-5f);
                // Without and with the bias gradient (one and two column-sum outputs): dx is
                // overwritten with the same values, dg must come out the same both times.
                mtk::layernorm_bwd(nullptr, dx.data(), dg.data(), nullptr, fdy.data(), fx.data(),
                                   fg.data(), mean.data(), rstd.data(), rows, dim, false,
                                   scratch.data());
                mtk::layernorm_bwd(nullptr, dx.data(), dg2.data(), db.data(), fdy.data(), fx.data(),
                                   fg.data(), mean.data(), rstd.data(), rows, dim, false,
                                   scratch.data());
                CHECK_MESSAGE(same_bits(dg, dg2), "dg differs with and without the bias gradient");
                return std::make_tuple(y.values(), mean, rstd, dx.values(), dg, db);
            },
            groups);
        Vec wly(rows * dim), wm(rows), wlr(rows), wldx(rows * dim), wldg(dim, 0.0), wldb(dim, 0.0);
        ref::layernorm_fwd(wly, wm, wlr, x, g, b, rows, dim, 1e-5);
        ref::layernorm_bwd(wldx, wldg, wldb, dy, x, g, to_f64(std::get<1>(ln)),
                           to_f64(std::get<2>(ln)), rows, dim, false);
        check_close(std::get<0>(ln), wly, kTol, "layernorm y");
        check_close(std::get<3>(ln), wldx, Tol{1e-3, 1e-4}, "layernorm dx");
        check_close(std::get<4>(ln), wldg, Tol{1e-3, 1e-4}, "layernorm dg");
        check_close(std::get<5>(ln), wldb, kTol, "layernorm db");
    }
}

// A 16-bit y (mixed-precision storage) holds the f32 y rounded to nearest even, bit for bit, on
// every placement (y and x rows at the first offset, the gain and bias at the other: a row gets
// groups where its start and the gain agree on the alignment, 16-bit or not).
TEST_CASE("simt: norm forward writes a 16-bit y as the rounded f32 y") {
    for (auto [rows, dim] :
         {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {4, 64}, {5, 257}, {70, 68}}) {
        CAPTURE(rows);
        CAPTURE(dim);
        auto groups = [&](const Placement& p) { return some_row_grouped(p, rows, dim); };
        Rng rng(static_cast<uint64_t>(rows * 59 + dim));
        Vec x = rng.normal(rows * dim, 3.0), g = rng.uniform(dim, 0.5, 1.5), b = rng.normal(dim);
        FVec fx = to_f32(x), fg = to_f32(g), fb = to_f32(b);
        FVec rms32(rows * dim), ln32(rows * dim), rstd(rows), mean(rows);
        mtk::rmsnorm_fwd(nullptr, rms32.data(), rstd.data(), fx.data(), fg.data(), rows, dim,
                         1e-5f);
        mtk::layernorm_fwd(nullptr, ln32.data(), mean.data(), rstd.data(), fx.data(), fg.data(),
                           fb.data(), rows, dim, 1e-5f);
        for (auto kind : {mtk::FloatKind::bf16, mtk::FloatKind::f16}) {
            CAPTURE(static_cast<int>(kind));
            const bool bf16 = kind == mtk::FloatKind::bf16;
            auto y = across_placements(
                "norm fwd 16-bit y",
                [&](const Placement& p) {
                    Placed<uint16_t> ry(std::vector<uint16_t>(rows * dim, 0), p.first),
                        ly(std::vector<uint16_t>(rows * dim, 0), p.first);
                    Placed<float> px(fx, p.first), pg(fg, p.rest), pb(fb, p.rest);
                    FVec rs(rows), mu(rows), lrs(rows);
                    mtk::rmsnorm_fwd(nullptr, ry.data(), rs.data(), px.data(), pg.data(), rows, dim,
                                     1e-5f, kind);
                    mtk::layernorm_fwd(nullptr, ly.data(), mu.data(), lrs.data(), px.data(),
                                       pg.data(), pb.data(), rows, dim, 1e-5f, kind);
                    return std::make_pair(ry.values(), ly.values());
                },
                groups);
            CHECK_MESSAGE(y.first == rounded16(rms32, bf16), "rmsnorm: 16-bit y != rounded f32 y");
            CHECK_MESSAGE(y.second == rounded16(ln32, bf16),
                          "layernorm: 16-bit y != rounded f32 y");
        }
    }
}

// Rows whose streams fit the shared-memory copy (launch.h norm_rows) and rows just past the
// bound (the backward passes keep two streams, the forward passes one), against the reference.
TEST_CASE("simt: norm rows at and past the shared-memory bound") {
    const int64_t bwd = static_cast<int64_t>(mtk::kMaxDynamicShmem / (2 * sizeof(float)));
    const int64_t fwd = 2 * bwd;
    CHECK(mtk::norm_row_cached(bwd, 2));
    CHECK_FALSE(mtk::norm_row_cached(bwd + 1, 2));
    CHECK(mtk::norm_row_cached(fwd, 1));
    CHECK_FALSE(mtk::norm_row_cached(fwd + 1, 1));
    for (int64_t dim : {bwd, bwd + 1, fwd + 1}) {
        const int64_t rows = 2;
        CAPTURE(dim);
        Rng rng(static_cast<uint64_t>(dim));
        Vec x = rng.normal(rows * dim, 2.0), g = rng.uniform(dim, 0.5, 1.5), b = rng.normal(dim);
        Vec dy = rng.normal(rows * dim), dx0 = rng.normal(rows * dim);
        for (auto& v : x) v = static_cast<float>(v + 3.0);
        auto got = two_schedules("norms", [&] {
            FVec fx = to_f32(x), fg = to_f32(g), fb = to_f32(b), fdy = to_f32(dy);
            FVec y(rows * dim), ry(rows * dim), mean(rows), rstd(rows), rrstd(rows);
            FVec dx = to_f32(dx0), rdx = to_f32(dx0), dg(dim, 0.0f), db(dim, 0.0f), rdg(dim, 0.0f);
            FVec scratch(mtk::norm_bwd_scratch_bytes(rows, dim) / sizeof(float), NAN);
            mtk::layernorm_fwd(nullptr, y.data(), mean.data(), rstd.data(), fx.data(), fg.data(),
                               fb.data(), rows, dim, 1e-5f);
            mtk::layernorm_bwd(nullptr, dx.data(), dg.data(), db.data(), fdy.data(), fx.data(),
                               fg.data(), mean.data(), rstd.data(), rows, dim, true,
                               scratch.data());
            mtk::rmsnorm_fwd(nullptr, ry.data(), rrstd.data(), fx.data(), fg.data(), rows, dim,
                             1e-5f);
            mtk::rmsnorm_bwd(nullptr, rdx.data(), rdg.data(), fdy.data(), fx.data(), fg.data(),
                             rrstd.data(), rows, dim, false, scratch.data());
            return std::make_tuple(y, mean, rstd, dx, dg, db, ry, rrstd, rdx, rdg);
        });
        Vec wy(rows * dim), wm(rows), wr(rows), wdx = dx0, wdg(dim, 0.0), wdb(dim, 0.0);
        ref::layernorm_fwd(wy, wm, wr, x, g, b, rows, dim, 1e-5);
        ref::layernorm_bwd(wdx, wdg, wdb, dy, x, g, to_f64(std::get<1>(got)),
                           to_f64(std::get<2>(got)), rows, dim, true);
        check_close(std::get<0>(got), wy, kTol, "layernorm y");
        check_close(std::get<3>(got), wdx, Tol{1e-3, 1e-4}, "layernorm dx");
        check_close(std::get<4>(got), wdg, Tol{1e-3, 1e-4}, "layernorm dg");
        check_close(std::get<5>(got), wdb, kTol, "layernorm db");
        Vec wry(rows * dim), wrr(rows), wrdx(rows * dim), wrdg(dim, 0.0);
        ref::rmsnorm_fwd(wry, wrr, x, g, rows, dim, 1e-5);
        ref::rmsnorm_bwd(wrdx, wrdg, dy, x, g, to_f64(std::get<7>(got)), rows, dim, false);
        check_close(std::get<6>(got), wry, kTol, "rmsnorm y");
        check_close(std::get<8>(got), wrdx, kTol, "rmsnorm dx");
        check_close(std::get<9>(got), wrdg, kTol, "rmsnorm dg");
    }
}

// The row kernels read their rows from the shared-memory copy or, launched without it, from
// global memory in every pass: the same values in the same order, so the same bits.
TEST_CASE("simt: norm rows give the same bits from shared memory and from global memory") {
    for (auto [rows, dim] : {std::pair<int64_t, int64_t>{3, 7}, {2, 257}, {2, 1023}}) {
        CAPTURE(rows);
        CAPTURE(dim);
        REQUIRE(mtk::norm_row_cached(dim, 2));
        Rng rng(static_cast<uint64_t>(rows * 59 + dim));
        const FVec x = to_f32(rng.normal(rows * dim, 2.0)), g = to_f32(rng.uniform(dim, 0.5, 1.5)),
                   b = to_f32(rng.normal(dim)), dy = to_f32(rng.normal(rows * dim)),
                   dx0 = to_f32(rng.normal(rows * dim));
        auto run = [&](bool cached) {
            const mtk::Geom g1 = cached ? mtk::norm_rows(rows, dim, 1) : mtk::per_row(rows, dim),
                            g2 = cached ? mtk::norm_rows(rows, dim, 2) : mtk::per_row(rows, dim);
            FVec y(rows * dim), mean(rows), rstd(rows), ry(rows * dim), rrstd(rows);
            FVec dx = dx0, rdx = dx0;
            MT_LAUNCH(mtk::layernorm_fwd_kernel, g1, nullptr, y.data(), 0, mean.data(), rstd.data(),
                      x.data(), g.data(), b.data(), dim, 1e-5f, cached);
            MT_LAUNCH(mtk::layernorm_bwd_kernel, g2, nullptr, dx.data(), dy.data(), x.data(),
                      g.data(), mean.data(), rstd.data(), dim, true, cached);
            MT_LAUNCH(mtk::rmsnorm_fwd_kernel, g1, nullptr, ry.data(), 0, rrstd.data(), x.data(),
                      g.data(), dim, 1e-5f, cached);
            MT_LAUNCH(mtk::rmsnorm_bwd_kernel, g2, nullptr, rdx.data(), dy.data(), x.data(),
                      g.data(), rrstd.data(), dim, false, cached);
            return std::make_tuple(y, mean, rstd, dx, ry, rrstd, rdx);
        };
        const auto shared = two_schedules("cached rows", [&] { return run(true); });
        const auto global = two_schedules("rows from global memory", [&] { return run(false); });
        CHECK(same_bits(shared, global));
    }
}
