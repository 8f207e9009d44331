// Op tests, normalisation and positions: rmsnorm / layernorm forward and backward (with and
// without dx accumulation, layernorm with and without bias) and RoPE (forward, inverse, pos0
// offset, a device-side offset equal bit for bit to the same host position, an invalid one
// reported) against the float64 reference. Tolerance rel 1e-4, abs 1e-5 unless stated.
#include <cmath>

#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {
const std::pair<int64_t, int64_t> kNormShapes[] = {{1, 1}, {3, 7}, {17, 64}, {65, 33}, {130, 257}};
}

TEST_CASE("ops: rmsnorm_fwd rmsnorm_bwd") {
    for_each_test_device([&](Device& dev) {
        for (auto [rows, dim] : kNormShapes) {
            CAPTURE(rows);
            CAPTURE(dim);
            Rng rng(static_cast<uint64_t>(rows * 31 + dim));
            auto x = rng.normal(rows * dim, 2.0), g = rng.uniform(dim, 0.5, 1.5);
            auto dy = rng.normal(rows * dim), dx0 = rng.normal(rows * dim), dg0 = rng.normal(dim);
            const float eps = 1e-5f;
            Tensor tx = to_device(dev, x), tg = to_device(dev, g);
            Tensor ty = zeros(dev, rows * dim), trs = zeros(dev, rows);
            dev.rmsnorm_fwd(ty, trs, tx, tg, rows, dim, eps);
            ref::Vec y(x.size()), rs(static_cast<size_t>(rows));
            ref::rmsnorm_fwd(y, rs, x, g, rows, dim, eps);
            check_close(from_device(dev, ty), y, Tol{}, "rmsnorm y");
            check_close(from_device(dev, trs), rs, Tol{}, "rmsnorm rstd");
            for (bool acc : {false, true}) {
                CAPTURE(acc);
                Tensor tdx = to_device(dev, dx0), tdg = to_device(dev, dg0);
                dev.rmsnorm_bwd(tdx, tdg, to_device(dev, dy), tx, tg, trs, rows, dim, acc);
                auto dx = dx0, dg = dg0;
                ref::rmsnorm_bwd(dx, dg, dy, x, g, rs, rows, dim, acc);
                check_close(from_device(dev, tdx), dx, Tol{}, "rmsnorm dx");
                check_close(from_device(dev, tdg), dg,
                            Tol{1e-4, 2e-5 * std::sqrt(static_cast<double>(rows))}, "rmsnorm dg");
            }
        }
    });
}

TEST_CASE("ops: layernorm_fwd layernorm_bwd with and without bias") {
    for_each_test_device([&](Device& dev) {
        for (auto [rows, dim] : kNormShapes) {
            if (dim == 1)
                continue;  // variance 0: the output is b, the gradient 0 (not informative)
            for (bool with_bias : {false, true}) {
                CAPTURE(rows);
                CAPTURE(dim);
                CAPTURE(with_bias);
                Rng rng(static_cast<uint64_t>(rows * 37 + dim));
                auto x = rng.normal(rows * dim, 2.0);
                for (auto& v : x) v = static_cast<float>(v + 0.5);  // nonzero mean
                auto g = rng.uniform(dim, 0.5, 1.5);
                ref::Vec b = with_bias ? rng.normal(dim) : ref::Vec{};
                auto dy = rng.normal(rows * dim), dx0 = rng.normal(rows * dim);
                auto dg0 = rng.normal(dim), db0 = rng.normal(dim);
                const float eps = 1e-5f;
                Tensor tx = to_device(dev, x), tg = to_device(dev, g);
                Tensor tb = with_bias ? to_device(dev, b) : Tensor{};
                Tensor ty = zeros(dev, rows * dim), tmu = zeros(dev, rows), trs = zeros(dev, rows);
                dev.layernorm_fwd(ty, tmu, trs, tx, tg, tb, rows, dim, eps);
                ref::Vec y(x.size()), mu(static_cast<size_t>(rows)), rs(static_cast<size_t>(rows));
                ref::layernorm_fwd(y, mu, rs, x, g, b, rows, dim, eps);
                check_close(from_device(dev, ty), y, Tol{}, "layernorm y");
                check_close(from_device(dev, tmu), mu, Tol{}, "layernorm mean");
                check_close(from_device(dev, trs), rs, Tol{}, "layernorm rstd");
                for (bool acc : {false, true}) {
                    CAPTURE(acc);
                    Tensor tdx = to_device(dev, dx0), tdg = to_device(dev, dg0);
                    Tensor tdb = with_bias ? to_device(dev, db0) : Tensor{};
                    dev.layernorm_bwd(tdx, tdg, tdb, to_device(dev, dy), tx, tg, tmu, trs, rows,
                                      dim, acc);
                    auto dx = dx0, dg = dg0;
                    ref::Vec db = with_bias ? db0 : ref::Vec{};
                    ref::layernorm_bwd(dx, dg, db, dy, x, g, mu, rs, rows, dim, acc);
                    const Tol col{1e-4, 2e-5 * std::sqrt(static_cast<double>(rows))};
                    check_close(from_device(dev, tdx), dx, Tol{}, "layernorm dx");
                    check_close(from_device(dev, tdg), dg, col, "layernorm dg");
                    if (with_bias) check_close(from_device(dev, tdb), db, col, "layernorm db");
                }
            }
        }
    });
}

TEST_CASE("ops: rope forward, inverse, position offset") {
    for_each_test_device([&](Device& dev) {
        struct Case {
            int64_t B, T, nh, hd, pos0;
            float theta;
        };
        for (const Case& c : {Case{1, 1, 1, 2, 0, 10000.0f}, Case{2, 7, 3, 8, 0, 10000.0f},
                              Case{1, 33, 2, 64, 5, 500000.0f}, Case{3, 5, 1, 6, 1000, 10000.0f}}) {
            CAPTURE(c.T);
            CAPTURE(c.hd);
            CAPTURE(c.pos0);
            const int64_t n = c.B * c.T * c.nh * c.hd;
            Rng rng(static_cast<uint64_t>(n));
            auto x = rng.normal(n);
            for (bool inverse : {false, true}) {
                CAPTURE(inverse);
                Tensor tx = to_device(dev, x);
                dev.rope(tx, c.B, c.T, c.nh, c.hd, c.theta, c.pos0, Tensor{}, inverse);
                auto want = x;
                ref::rope(want, c.B, c.T, c.nh, c.hd, c.theta, c.pos0, inverse);
                // Angles up to ~1000 rad: cos/sin of a float angle differ by ~|angle| * 1e-7.
                const std::vector<double> got = from_device(dev, tx);
                check_close(got, want, Tol{1e-4, 1e-5 + 2e-7 * static_cast<double>(c.pos0 + c.T)},
                            "rope");
                // The same positions with all of pos0, half of it, or -2 (the host part then
                // pos0 + 2) from pos_dev: the same bits.
                const auto p0 = static_cast<int32_t>(c.pos0);
                for (int32_t offset : {p0, p0 / 2, int32_t{-2}}) {
                    CAPTURE(offset);
                    Tensor td = to_device(dev, x);
                    dev.rope(td, c.B, c.T, c.nh, c.hd, c.theta, c.pos0 - offset,
                             to_device(dev, std::vector<int32_t>{offset}), inverse);
                    CHECK(from_device(dev, td) == got);
                }
                dev.rope(tx, c.B, c.T, c.nh, c.hd, c.theta, c.pos0, Tensor{}, !inverse);
                check_close(from_device(dev, tx), x,
                            Tol{1e-4, 1e-5 + 2e-7 * static_cast<double>(c.pos0 + c.T)},
                            "rope then its inverse");
            }
        }
        Tensor odd = zeros(dev, 6);
        CHECK_THROWS_AS(dev.rope(odd, 1, 1, 2, 3, 10000.0f, 0, Tensor{}, false), Error);
        // A device offset that puts a position below 0 or at 2^30: reported, x left alone.
        Tensor x8 = to_device(dev, std::vector<double>(16, 1.0));
        for (int32_t offset : {int32_t{-3}, int32_t{(1 << 30) - 2}}) {
            CAPTURE(offset);
            Tensor pd = to_device(dev, std::vector<int32_t>{offset});
            CHECK_THROWS_AS((dev.rope(x8, 1, 2, 2, 4, 10000.0f, 1, pd, false), dev.synchronize()),
                            Error);
            CHECK(from_device(dev, x8) == std::vector<double>(16, 1.0));
        }
    });
}
