// Op tests, the reference itself: every backward op of tests/reference_ops.cpp is checked
// against central finite differences (float64, step 1e-6) of the reference forward ops, on
// small sizes, so that the ground truth the device tests compare with is trusted. Tolerance
// rel 1e-5, abs 1e-7 (central differences are O(h^2) accurate; rounding ~1e-10).
#include <array>
#include <functional>
#include <tuple>

#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;
using ref::IVec;
using ref::Vec;

namespace {
const Tol kFdTol{1e-5, 1e-7};

// d f / d x by central differences at every element of x.
Vec numeric_grad(const std::function<double(const Vec&)>& f, Vec x, double h = 1e-6) {
    Vec g(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const double xi = x[i];
        x[i] = xi + h;
        const double fp = f(x);
        x[i] = xi - h;
        const double fm = f(x);
        x[i] = xi;
        g[i] = (fp - fm) / (2 * h);
    }
    return g;
}

// Each analytic gradient grads[i] of f(inputs...) against the central differences of f in
// input i alone (the other inputs held), reported under names[i].
template <class F, size_t N>
void check_input_grads(F f, const std::array<Vec, N>& inputs,
                       const std::array<const Vec*, N>& grads,
                       const std::array<const char*, N>& names) {
    for (size_t i = 0; i < N; ++i) {
        auto fi = [&](const Vec& v) {
            std::array<Vec, N> args = inputs;
            args[i] = v;
            return std::apply(f, args);
        };
        check_close(*grads[i], numeric_grad(fi, inputs[i]), kFdTol, names[i]);
    }
}

double dot(const Vec& a, const Vec& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}
}  // namespace

TEST_CASE("ops: reference rmsnorm_bwd layernorm_bwd match finite differences") {
    const int64_t rows = 3, dim = 5;
    Rng rng(1);
    auto x = rng.normal(rows * dim), g = rng.uniform(dim, 0.5, 1.5), b = rng.normal(dim);
    auto r = rng.normal(rows * dim);  // f = sum r * y
    const double eps = 1e-5;
    {
        auto f = [&](const Vec& xx, const Vec& gg) {
            Vec y(xx.size()), rs(rows);
            ref::rmsnorm_fwd(y, rs, xx, gg, rows, dim, eps);
            return dot(r, y);
        };
        Vec y(x.size()), rs(rows), dx(x.size()), dg(dim, 0.0);
        ref::rmsnorm_fwd(y, rs, x, g, rows, dim, eps);
        ref::rmsnorm_bwd(dx, dg, r, x, g, rs, rows, dim, false);
        check_input_grads(f, std::array{x, g}, {&dx, &dg}, {"rmsnorm dx", "rmsnorm dg"});
    }
    {
        auto f = [&](const Vec& xx, const Vec& gg, const Vec& bb) {
            Vec y(xx.size()), mu(rows), rs(rows);
            ref::layernorm_fwd(y, mu, rs, xx, gg, bb, rows, dim, eps);
            return dot(r, y);
        };
        Vec y(x.size()), mu(rows), rs(rows), dx(x.size()), dg(dim, 0.0), db(dim, 0.0);
        ref::layernorm_fwd(y, mu, rs, x, g, b, rows, dim, eps);
        ref::layernorm_bwd(dx, dg, db, r, x, g, mu, rs, rows, dim, false);
        check_input_grads(f, std::array{x, g, b}, {&dx, &dg, &db},
                          {"layernorm dx", "layernorm dg", "layernorm db"});
    }
}

TEST_CASE("ops: reference attention_bwd matches finite differences (GQA, decode, capacity)") {
    for (const AttnDims& d : {AttnDims{1, 4, 4, 5, 4, 2, 3}, AttnDims{2, 2, 5, 6, 2, 1, 4}}) {
        const int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd;
        Rng rng(static_cast<uint64_t>(nq + nk));
        auto q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk), r = rng.normal(nq);
        const double scale = 0.6;
        auto f = [&](const Vec& qq, const Vec& kk, const Vec& vv) {
            Vec o(static_cast<size_t>(nq)), lse(static_cast<size_t>(d.B * d.H * d.Tq));
            ref::attention_fwd(o, lse, qq, kk, vv, d, scale);
            return dot(r, o);
        };
        Vec dq(static_cast<size_t>(nq)), dk(static_cast<size_t>(nk)), dv(static_cast<size_t>(nk));
        ref::attention_bwd(dq, dk, dv, r, q, k, v, d, scale);
        check_input_grads(f, std::array{q, k, v}, {&dq, &dk, &dv},
                          {"attention dq", "attention dk", "attention dv"});
    }
}

TEST_CASE("ops: reference act_bwd swiglu_bwd match finite differences") {
    Rng rng(2);
    const int64_t n = 9;
    auto x = rng.normal(n, 2.0), up = rng.normal(n), r = rng.normal(n);
    for (Act a : {Act::gelu, Act::relu, Act::silu}) {
        CAPTURE(static_cast<int>(a));
        Vec dx(n);
        ref::act_bwd(a, dx, r, x, n);
        auto f = [&](const Vec& v) {
            Vec y(v.size());
            ref::act_fwd(a, y, v, n);
            return dot(r, y);
        };
        check_close(dx, numeric_grad(f, x), kFdTol, "act dx");
    }
    Vec dg(n), du(n);
    ref::swiglu_bwd(dg, du, r, x, up, n);
    auto f = [&](const Vec& gg, const Vec& uu) {
        Vec h(gg.size());
        ref::swiglu_fwd(h, gg, uu, n);
        return dot(r, h);
    };
    check_input_grads(f, std::array{x, up}, {&dg, &du}, {"swiglu dgate", "swiglu dup"});
}

TEST_CASE("ops: reference router_bwd matches finite differences of top-k weights + aux + z") {
    // softmax and sigmoid scores, with and without renormalisation, expert bias and scaling.
    for (bool sigmoid : {false, true})
        for (bool norm : {true, false}) {
            CAPTURE(sigmoid);
            CAPTURE(norm);
            const int64_t N = 4, E = 5, k = 2;
            Rng rng(norm ? 3 : 4);
            // Distinct, well separated logits: the top-k selection cannot change within the step.
            Vec logits(static_cast<size_t>(N * E));
            for (int64_t n = 0; n < N; ++n) {
                auto perm = rng.ints(E, 0, 1000);
                for (int64_t e = 0; e < E; ++e)
                    logits[n * E + e] =
                        0.3 * static_cast<double>((e * 7 + n * 3) % E) + perm[e] * 1e-5;
            }
            const Vec bias = sigmoid ? Vec{0.01, -0.02, 0.0, 0.03, -0.01} : Vec{};
            RouterArgs ra;
            ra.sigmoid = sigmoid;
            ra.norm_topk = norm;
            ra.scaling = sigmoid ? 2.5f : 1.0f;
            auto dtw = rng.normal(N * k);
            const double aux_alpha = 0.3, z_alpha = 0.2, scale = 0.7;
            Vec p(static_cast<size_t>(N * E)), lse(N), w(static_cast<size_t>(N * k));
            IVec idx(static_cast<size_t>(N * k));
            ref::router_fwd(p, lse, idx, w, logits, bias, N, E, k, ra);
            IVec counts(E), rt(static_cast<size_t>(N * k)), sr(static_cast<size_t>(N * k));
            ref::moe_sort(counts, rt, sr, idx, N, k, E);
            auto f = [&](const Vec& l) {
                Vec pp(p.size()), ll(lse.size()), ww(w.size());
                IVec ii(idx.size());
                ref::router_fwd(pp, ll, ii, ww, l, bias, N, E, k, ra);
                REQUIRE(ii == idx);
                Vec out{0, 0};
                ref::router_aux_loss(out, pp, ll, counts, N, E, k, ra, aux_alpha,
                                     z_alpha);  // counts fixed
                return dot(dtw, ww) + scale * (out[0] + out[1]);
            };
            Vec dl(logits.size());
            ref::router_bwd(dl, dtw, p, lse, logits, idx, w, counts, N, E, k, ra, aux_alpha,
                            z_alpha, scale);
            check_close(dl, numeric_grad(f, logits), kFdTol, "router dlogits");
        }
}

TEST_CASE("ops: reference cross_entropy gradient matches finite differences") {
    const int64_t N = 4, V = 6;
    Rng rng(5);
    auto logits = rng.normal(N * V, 2.0);
    IVec targets{2, -1, 0, 5};
    const double gs = 0.25;
    Vec loss(N), grad(logits.size());
    ref::cross_entropy(loss, grad, logits, targets, N, V, gs);
    auto f = [&](const Vec& l) {
        Vec ls(N), gr(l.size());
        ref::cross_entropy(ls, gr, l, targets, N, V, 0.0);
        double s = 0;
        for (double x : ls) s += x;
        return gs * s;
    };
    check_close(grad, numeric_grad(f, logits), kFdTol, "cross_entropy grad");
    CHECK(loss[1] == 0.0);
}

TEST_CASE("ops: reference moe_combine_bwd embedding_bwd bias_grad match finite differences") {
    Rng rng(6);
    {
        const int64_t N = 3, k = 2, dim = 4, R = N * k;
        IVec slot_row{4, 1, 0, 5, 3, 2};
        auto rows = rng.normal(R * dim), w = rng.uniform(N * k, 0.1, 1.0), dy = rng.normal(N * dim);
        auto f = [&](const Vec& rr, const Vec& ww) {
            Vec y(static_cast<size_t>(N * dim));
            ref::moe_combine(y, rr, slot_row, ww, N, k, dim, false);
            return dot(dy, y);
        };
        Vec drows(rows.size()), dw(w.size());
        ref::moe_combine_bwd(drows, dw, dy, rows, slot_row, w, N, k, dim);
        check_input_grads(f, std::array{rows, w}, {&drows, &dw}, {"combine drows", "combine dw"});
    }
    {
        const int64_t n = 5, dim = 3, V = 4;
        IVec ids{1, 3, 1, 0, 1};
        auto table = rng.normal(V * dim), dout = rng.normal(n * dim);
        Vec dtable(table.size(), 0.0);
        ref::embedding_bwd(dtable, dout, ids, n, dim);
        auto f = [&](const Vec& t) {
            Vec out(static_cast<size_t>(n * dim));
            ref::embedding_fwd(out, t, ids, n, dim, false);
            return dot(dout, out);
        };
        check_close(dtable, numeric_grad(f, table), kFdTol, "embedding dtable");
    }
    {
        const int64_t rows = 4, cols = 3;
        auto y = rng.normal(rows * cols), bias = rng.normal(cols), dy = rng.normal(rows * cols);
        Vec db(cols, 0.0);
        ref::bias_grad(db, dy, rows, cols);
        auto f = [&](const Vec& bb) {
            Vec yy = y;
            ref::add_bias(yy, bb, rows, cols);
            return dot(dy, yy);
        };
        check_close(db, numeric_grad(f, bias), kFdTol, "bias_grad");
    }
}

TEST_CASE("ops: reference rope inverse is the adjoint (the backward) of rope") {
    const int64_t B = 2, T = 3, nh = 2, hd = 6, n = B * T * nh * hd;
    Rng rng(7);
    auto x = rng.normal(n), y = rng.normal(n);
    Vec rx = x, ry = y;
    ref::rope(rx, B, T, nh, hd, 10000.0, 4, false);
    ref::rope(ry, B, T, nh, hd, 10000.0, 4, true);
    CHECK(dot(rx, y) == doctest::Approx(dot(x, ry)).epsilon(1e-12));
    ref::rope(rx, B, T, nh, hd, 10000.0, 4, true);
    check_close(rx, x, Tol{1e-12, 1e-12}, "rope inverse undoes rope");
}
