// Harness tests of kernels_cuda/norm.cuh: RMSNorm and LayerNorm forward and backward (with and
// without LayerNorm bias, dx accumulated or overwritten) on awkward row lengths.
#include "harness_util.h"
#include "norm.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;

namespace {
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1}, {3, 7}, {2, 33}, {130, 17}, {5, 257}, {2, 1023}};
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
            mtk::rmsnorm_fwd(nullptr, y.data(), rstd.data(), fx.data(), fg.data(), rows, dim, 1e-5f);
            return std::make_pair(y, rstd);
        });
        Vec wy(rows * dim), wr(rows);
        ref::rmsnorm_fwd(wy, wr, x, g, rows, dim, 1e-5);
        check_close(fwd.first, wy, kTol, "rmsnorm y");
        check_close(fwd.second, wr, kTol, "rmsnorm rstd");
        for (bool acc : {false, true}) {
            CAPTURE(acc);
            auto bwd = two_schedules("rmsnorm_bwd", [&] {
                FVec dx = to_f32(dx0), dg = to_f32(dg0), fdy = to_f32(dy), fx = to_f32(x), fg = to_f32(g);
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
            Vec x = rng.normal(rows * dim, 2.0), g = rng.uniform(dim, 0.5, 1.5), b = rng.normal(dim);
            Vec dy = rng.normal(rows * dim), dx0 = rng.normal(rows * dim), dg0 = rng.normal(dim), db0 = rng.normal(dim);
            for (auto& v : x) v = static_cast<float>(v + 3.0);  // a mean far from 0
            Vec bvec = bias ? b : Vec{};
            auto fwd = two_schedules("layernorm_fwd", [&] {
                FVec y(rows * dim), mean(rows), rstd(rows), fx = to_f32(x), fg = to_f32(g), fb = to_f32(b);
                mtk::layernorm_fwd(nullptr, y.data(), mean.data(), rstd.data(), fx.data(), fg.data(),
                                   bias ? fb.data() : nullptr, rows, dim, 1e-5f);
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
