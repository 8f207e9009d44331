// Op tests, loss / reductions / optimizers / sampling: cross_entropy (ignored targets, with
// and without the gradient), sum and sum_squares (accumulate, long vectors), adamw and sgd
// (clipping active and inactive, grad_scale), sample (greedy with ties, temperature, top-k,
// top-p, several rows, the Philox step from the device). Floats within rel 1e-4, abs 1e-5;
// sampled ids exactly.
#include <cmath>

#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

TEST_CASE("ops: cross_entropy with ignored targets and gradient") {
    for_each_test_device([&](Device& dev) {
        uint64_t seed = 41;
        for (auto [N, V] :
             {std::pair<int64_t, int64_t>{1, 1}, {1, 2}, {7, 33}, {33, 1000}, {64, 257}}) {
            for (float gs : {0.0f, 1.0f, 0.125f}) {
                CAPTURE(N);
                CAPTURE(V);
                CAPTURE(gs);
                Rng rng(seed++);
                auto logits = rng.normal(N * V, 3.0);
                auto targets = rng.ints(N, 0, static_cast<int32_t>(V - 1));
                if (N > 2) targets[1] = -1, targets[N - 1] = -1;
                Tensor tl = to_device(dev, logits), tloss = zeros(dev, N);
                dev.cross_entropy(tloss, tl, to_device(dev, targets), N, V, gs, Tensor{});
                ref::Vec loss(static_cast<size_t>(N)), grad(logits.size());
                ref::cross_entropy(loss, grad, logits, targets, N, V, gs);
                check_close(from_device(dev, tloss), loss, Tol{}, "cross_entropy loss");
                check_close(from_device(dev, tl), gs == 0.0f ? logits : grad, Tol{},
                            "cross_entropy logits / grad");
            }
        }
        Tensor t = zeros(dev, 8);
        CHECK_THROWS_AS(dev.cross_entropy(t, t, to_device(dev, ref::IVec{4}), 1, 4, 1.0f, Tensor{}),
                        Error);
    });
}

TEST_CASE("ops: sum sum_squares") {
    for_each_test_device([&](Device& dev) {
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{8193}, int64_t{100003}}) {
            for (bool acc : {false, true}) {
                CAPTURE(n);
                CAPTURE(acc);
                Rng rng(static_cast<uint64_t>(n) + acc);
                auto x = rng.normal(n);
                Tensor tx = to_device(dev, x);
                ref::Vec s{1.5}, ss{2.5};
                Tensor ts = to_device(dev, s), tss = to_device(dev, ss);
                dev.sum(ts, tx, n, 0.5f, acc);
                dev.sum_squares(tss, tx, n, acc);
                ref::sum(s, x, n, 0.5, acc);
                ref::sum_squares(ss, x, n, acc);
                check_close(from_device(dev, ts), s, Tol{}, "sum");
                check_close(from_device(dev, tss), ss, Tol{}, "sum_squares");
            }
        }
    });
}

TEST_CASE("ops: adamw sgd with and without clipping") {
    for_each_test_device([&](Device& dev) {
        const int64_t n = 1027;
        for (float clip : {0.0f, 1.0f, 1000.0f}) {
            for (float gscale : {1.0f, 0.25f}) {
                CAPTURE(clip);
                CAPTURE(gscale);
                Rng rng(static_cast<uint64_t>(clip * 10 + gscale * 4));
                auto p = rng.normal(n), g = rng.normal(n), m = rng.normal(n, 0.1),
                     v = rng.uniform(n, 0.0, 0.1);
                ref::Vec gn{0};
                ref::sum_squares(gn, g, n, false);
                gn[0] = static_cast<float>(gn[0]);
                AdamWArgs a;
                a.lr = 3e-3f;
                a.wd = 0.1f;
                a.bc1 = 1.0f - std::pow(0.9f, 3.0f);
                a.bc2 = 1.0f - std::pow(0.95f, 3.0f);
                Tensor tp = to_device(dev, p), tm = to_device(dev, m), tv = to_device(dev, v),
                       tgn = to_device(dev, gn);
                Tensor tg = to_device(dev, g);
                dev.adamw(tp, tg, tm, tv, n, a, tgn, clip, gscale);
                auto wp = p, wm = m, wv = v;
                ref::adamw(wp, g, wm, wv, n, a, gn[0], clip, gscale);
                check_close(from_device(dev, tp), wp, Tol{}, "adamw p");
                check_close(from_device(dev, tm), wm, Tol{}, "adamw m");
                check_close(from_device(dev, tv), wv, Tol{}, "adamw v");
                Tensor tp2 = to_device(dev, p);
                dev.sgd(tp2, tg, n, 0.1f, tgn, clip, gscale);
                auto sp = p;
                ref::sgd(sp, g, n, 0.1, gn[0], clip, gscale);
                check_close(from_device(dev, tp2), sp, Tol{}, "sgd p");
            }
        }
    });
}

TEST_CASE("ops: sample greedy ties, temperature, top-k, top-p") {
    for_each_test_device([&](Device& dev) {
        const int64_t B = 5, V = 67;
        struct Case {
            float temperature;
            int64_t top_k;
            float top_p;
        };
        for (const Case& c : {Case{0, 0, 1}, Case{1, 0, 1}, Case{0.7f, 5, 1}, Case{1.3f, 0, 0.8f},
                              Case{1, 3, 0.5f}, Case{1, 1, 1}, Case{2, 100, 0.999f}}) {
            CAPTURE(c.temperature);
            CAPTURE(c.top_k);
            CAPTURE(c.top_p);
            for (uint64_t step = 0; step < 6; ++step) {
                Rng rng(step + 100);
                auto logits = rng.grid(B * V, -20, 20, 0.125);
                logits[3] = logits[10] = 10.0;  // row 0: a tie for the maximum
                SampleArgs s{c.temperature, c.top_k, c.top_p, 1234, step};
                Tensor ids = zeros(dev, B, DType::i32);
                dev.sample(ids, to_device(dev, logits), B, V, s);
                ref::IVec want(static_cast<size_t>(B));
                ref::sample(want, logits, B, V, s);
                check_equal(from_device_i32(dev, ids), want, "sample");
                // The step from the device (step_dev, read as uint32): all of it, or -1 on the
                // device with the host step 1 higher (wrapping modulo 2^32 into 2^32 + step).
                for (int32_t dev_step : {static_cast<int32_t>(step), int32_t{-1}}) {
                    CAPTURE(dev_step);
                    SampleArgs sd = s;
                    sd.step = dev_step == -1 ? step + 1 : 0;
                    sd.step_dev = to_device(dev, std::vector<int32_t>{dev_step});
                    Tensor ids2 = zeros(dev, B, DType::i32);
                    dev.sample(ids2, to_device(dev, logits), B, V, sd);
                    SampleArgs sr = s;
                    sr.step = dev_step == -1 ? step + (uint64_t{1} << 32) : step;
                    ref::sample(want, logits, B, V, sr);
                    check_equal(from_device_i32(dev, ids2), want, "sample (device step)");
                }
            }
        }
    });
}
