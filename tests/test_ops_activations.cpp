// Op tests, activations: gelu (tanh) / relu / silu forward and backward, SwiGLU forward and
// backward, row-wise softmax (in place too, large logits) against the float64 reference.
// Tolerance rel 1e-4, abs 1e-5.
#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

TEST_CASE("ops: act_fwd act_bwd gelu relu silu") {
    for_each_test_device([&](Device& dev) {
        for (Act a : {Act::gelu, Act::relu, Act::silu}) {
            for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{4099}}) {
                CAPTURE(static_cast<int>(a));
                CAPTURE(n);
                Rng rng(static_cast<uint64_t>(n) + static_cast<uint64_t>(a));
                auto x = rng.normal(n, 4.0), dy = rng.normal(n);
                if (n > 3) x[1] = 0.0, x[2] = 30.0, x[3] = -30.0;
                Tensor tx = to_device(dev, x), ty = zeros(dev, n), tdx = zeros(dev, n);
                dev.act_fwd(a, ty, tx, n);
                dev.act_bwd(a, tdx, to_device(dev, dy), tx, n);
                ref::Vec y(x.size()), dx(x.size());
                ref::act_fwd(a, y, x, n);
                ref::act_bwd(a, dx, dy, x, n);
                check_close(from_device(dev, ty), y, Tol{}, "act_fwd");
                check_close(from_device(dev, tdx), dx, Tol{}, "act_bwd");
            }
        }
    });
}

TEST_CASE("ops: swiglu_fwd swiglu_bwd") {
    for_each_test_device([&](Device& dev) {
        for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{4099}}) {
            CAPTURE(n);
            Rng rng(static_cast<uint64_t>(n));
            auto gate = rng.normal(n, 3.0), up = rng.normal(n), dh = rng.normal(n);
            Tensor tg = to_device(dev, gate), tu = to_device(dev, up), th = zeros(dev, n);
            dev.swiglu_fwd(th, tg, tu, n);
            Tensor tdg = zeros(dev, n), tdu = zeros(dev, n);
            dev.swiglu_bwd(tdg, tdu, to_device(dev, dh), tg, tu, n);
            ref::Vec h(gate.size()), dg(gate.size()), du(gate.size());
            ref::swiglu_fwd(h, gate, up, n);
            ref::swiglu_bwd(dg, du, dh, gate, up, n);
            check_close(from_device(dev, th), h, Tol{}, "swiglu h");
            check_close(from_device(dev, tdg), dg, Tol{}, "swiglu dgate");
            check_close(from_device(dev, tdu), du, Tol{}, "swiglu dup");
        }
    });
}

TEST_CASE("ops: softmax rows, in place, large logits") {
    for_each_test_device([&](Device& dev) {
        for (auto [rows, cols] :
             {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {17, 1000}, {64, 33}}) {
            CAPTURE(rows);
            CAPTURE(cols);
            Rng rng(static_cast<uint64_t>(rows + cols));
            auto x = rng.normal(rows * cols, 5.0);
            x[0] = 80.0;  // exp would overflow without the max shift
            Tensor tx = to_device(dev, x), ty = zeros(dev, rows * cols);
            dev.softmax(ty, tx, rows, cols);
            ref::Vec y(x.size());
            ref::softmax(y, x, rows, cols);
            check_close(from_device(dev, ty), y, Tol{}, "softmax");
            dev.softmax(tx, tx, rows, cols);
            check_close(from_device(dev, tx), y, Tol{}, "softmax in place");
        }
    });
}
