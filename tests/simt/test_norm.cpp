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
                FVec scratch(mtk::colsum_scratch_bytes(rows, dim) / sizeof(float), NAN);
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
                    FVec scratch(mtk::colsum_scratch_bytes(rows, dim) / sizeof(float), NAN);
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
         {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {4, 64}, {5, 257}, {2, 1024}}) {
        CAPTURE(rows);
        CAPTURE(dim);
        auto groups = [&](const Placement& p) {
            for (int64_t r = 0; r < rows; ++r) {
                const int64_t start = p.first + r * dim;
                if (start % 4 == p.rest % 4 && dim - (4 - start % 4) % 4 >= 4) return true;
            }
            return false;
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
                    scratch(mtk::colsum_scratch_bytes(rows, dim) / sizeof(float), NAN);
                mtk::rmsnorm_fwd(nullptr, y.data(), rstd.data(), fx.data(), fg.data(), rows, dim,
                                 1e-5f);
                mtk::rmsnorm_bwd(nullptr, dx.data(), dg.data(), fdy.data(), fx.data(), fg.data(),
                                 rstd.data(), rows, dim, true, scratch.data());
                return std::make_tuple(y.values(), rstd, dx.values());
            },
            groups);
        Vec wy(rows * dim), wr(rows), wdx = dx0, wdg(dim, 0.0);
        ref::rmsnorm_fwd(wy, wr, x, g, rows, dim, 1e-5);
        ref::rmsnorm_bwd(wdx, wdg, dy, x, g, to_f64(std::get<1>(rms)), rows, dim, true);
        check_close(std::get<0>(rms), wy, kTol, "rmsnorm y");
        check_close(std::get<2>(rms), wdx, kTol, "rmsnorm dx");

        auto ln = across_placements(
            "layernorm",
            [&](const Placement& p) {
                Placed<float> y(FVec(rows * dim, 0.0f), p.first), fx(to_f32(x), p.first);
                Placed<float> fg(to_f32(g), p.rest), fb(to_f32(b), p.rest),
                    dx(FVec(rows * dim, 0.0f), p.first), fdy(to_f32(dy), p.first);
                FVec mean(rows), rstd(rows), dg(dim, 0.0f),
                    scratch(mtk::colsum_scratch_bytes(rows, dim) / sizeof(float), NAN);
                mtk::layernorm_fwd(nullptr, y.data(), mean.data(), rstd.data(), fx.data(),
                                   fg.data(), fb.data(), rows, dim, 1e-5f);
                mtk::layernorm_bwd(nullptr, dx.data(), dg.data(), nullptr, fdy.data(), fx.data(),
                                   fg.data(), mean.data(), rstd.data(), rows, dim, false,
                                   scratch.data());
                return std::make_tuple(y.values(), mean, rstd, dx.values());
            },
            groups);
        Vec wly(rows * dim), wm(rows), wlr(rows), wldx(rows * dim), wldg(dim, 0.0), none;
        ref::layernorm_fwd(wly, wm, wlr, x, g, b, rows, dim, 1e-5);
        ref::layernorm_bwd(wldx, wldg, none, dy, x, g, to_f64(std::get<1>(ln)),
                           to_f64(std::get<2>(ln)), rows, dim, false);
        check_close(std::get<0>(ln), wly, kTol, "layernorm y");
        check_close(std::get<3>(ln), wldx, Tol{1e-3, 1e-4}, "layernorm dx");
    }
}
