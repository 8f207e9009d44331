// Op tests, outputs stored in 16 bits (device_ops.def's FLOAT outputs: rmsnorm_fwd / layernorm_fwd
// y, act_fwd y, act_bwd dx, swiglu_fwd h, and cross_entropy's dlogits). Mixed-precision training
// stores these in bf16 / fp16 and the ops write them directly, so on every test device a 16-bit
// output must hold exactly the bits of the same op's f32 output rounded by `convert` (round to
// nearest even), for both 16-bit dtypes, at an odd element offset too (the CUDA kernels' 16-byte
// and single-element paths), with the op's other outputs unchanged; and an output of another dtype
// (or overlapping the logits) is refused at the front door.
#include <algorithm>
#include <cstring>
#include <string>

#include "op_test_util.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {

std::vector<uint16_t> bits16(Device& dev, const Tensor& t) {
    std::vector<uint16_t> v(static_cast<size_t>(t.numel()));
    dev.download(v.data(), t);
    return v;
}

// Runs op(y) with y an f32 tensor of n elements and with y a 16-bit view of n elements at
// element `offset` of a larger buffer; the 16-bit bits must equal convert(f32 result).
template <typename Op>
void check_rounded_output(Device& dev, int64_t n, int64_t offset, const char* what, Op op) {
    Tensor y32 = zeros(dev, n);
    op(y32);
    for (DType t : {DType::bf16, DType::f16}) {
        CAPTURE(dtype_name(t));
        CAPTURE(offset);
        Tensor want = zeros(dev, n, t);
        dev.convert(want, y32);
        Tensor buf = zeros(dev, n + offset + 3, t);
        dev.fill(buf, 7.0f);  // the elements around the view must stay untouched
        Tensor y16 = buf.view(offset, {n});
        op(y16);
        const auto got = bits16(dev, buf), w = bits16(dev, want);
        const uint16_t seven = t == DType::bf16 ? f32_to_bf16(7.0f) : f32_to_f16(7.0f);
        int64_t wrong = 0, touched = 0;
        for (int64_t i = 0; i < n + offset + 3; ++i) {
            const bool inside = i >= offset && i < offset + n;
            if (inside && got[static_cast<size_t>(i)] != w[static_cast<size_t>(i - offset)])
                ++wrong;
            if (!inside && got[static_cast<size_t>(i)] != seven) ++touched;
        }
        INFO(what);
        CHECK(wrong == 0);
        CHECK(touched == 0);
    }
}

const std::pair<int64_t, int64_t> kRows[] = {{1, 1}, {3, 7}, {17, 64}, {5, 257}};

}  // namespace

TEST_CASE("ops: rmsnorm_fwd / layernorm_fwd write a 16-bit y as the rounded f32 y") {
    for_each_test_device([&](Device& dev) {
        for (auto [rows, dim] : kRows) {
            CAPTURE(rows);
            CAPTURE(dim);
            Rng rng(static_cast<uint64_t>(rows * 7 + dim));
            Tensor x = to_device(dev, rng.normal(rows * dim, 3.0));
            Tensor g = to_device(dev, rng.uniform(dim, 0.5, 1.5)),
                   b = to_device(dev, rng.normal(dim));
            Tensor rs32 = zeros(dev, rows), mu32 = zeros(dev, rows);
            dev.rmsnorm_fwd(zeros(dev, rows * dim), rs32, x, g, rows, dim, 1e-5f);
            dev.layernorm_fwd(zeros(dev, rows * dim), mu32, zeros(dev, rows), x, g, b, rows, dim,
                              1e-5f);
            for (int64_t offset : {int64_t{0}, int64_t{1}, int64_t{4}}) {
                Tensor rs = zeros(dev, rows), mu = zeros(dev, rows), lrs = zeros(dev, rows);
                check_rounded_output(dev, rows * dim, offset, "rmsnorm y", [&](const Tensor& y) {
                    dev.rmsnorm_fwd(y.view(0, {rows, dim}), rs, x, g, rows, dim, 1e-5f);
                });
                CHECK(from_device(dev, rs) == from_device(dev, rs32));
                for (bool bias : {false, true}) {
                    CAPTURE(bias);
                    check_rounded_output(
                        dev, rows * dim, offset, "layernorm y", [&](const Tensor& y) {
                            dev.layernorm_fwd(y.view(0, {rows, dim}), mu, lrs, x, g,
                                              bias ? b : Tensor{}, rows, dim, 1e-5f);
                        });
                    CHECK(from_device(dev, mu) == from_device(dev, mu32));
                }
            }
        }
    });
}

TEST_CASE("ops: act_fwd / act_bwd / swiglu_fwd write a 16-bit output as the rounded f32 one") {
    for_each_test_device([&](Device& dev) {
        for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{4099}}) {
            CAPTURE(n);
            Rng rng(static_cast<uint64_t>(n) + 11);
            auto xs = rng.normal(n, 4.0);
            if (n > 3) xs[1] = 0.0, xs[2] = 1e6, xs[3] = -30.0;  // 1e6: f16 overflows to Inf
            Tensor x = to_device(dev, xs), up = to_device(dev, rng.normal(n, 2.0));
            Tensor dy = to_device(dev, rng.normal(n, 1e3));  // large: the f16 gradient overflows
            for (int64_t offset : {int64_t{0}, int64_t{3}}) {
                for (Act a : {Act::gelu, Act::relu, Act::silu}) {
                    CAPTURE(static_cast<int>(a));
                    check_rounded_output(dev, n, offset, "act_fwd y",
                                         [&](const Tensor& y) { dev.act_fwd(a, y, x, n); });
                    check_rounded_output(dev, n, offset, "act_bwd dx",
                                         [&](const Tensor& d) { dev.act_bwd(a, d, dy, x, n); });
                }
                check_rounded_output(dev, n, offset, "swiglu_fwd h",
                                     [&](const Tensor& h) { dev.swiglu_fwd(h, x, up, n); });
            }
        }
    });
}

TEST_CASE("ops: cross_entropy writes dlogits in place, separately or rounded to 16 bits") {
    for_each_test_device([&](Device& dev) {
        for (auto [N, V] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {5, 1000}, {3, 260}}) {
            CAPTURE(N);
            CAPTURE(V);
            Rng rng(static_cast<uint64_t>(N * 13 + V));
            const auto logits = rng.normal(N * V, 3.0);
            auto targets = rng.ints(N, 0, static_cast<int32_t>(V - 1));
            if (N > 2) targets[1] = -1;  // an ignored row: a zero gradient row
            Tensor tt = to_device(dev, targets);
            // The in-place gradient (dlogits empty) is the reference of every other form.
            Tensor in_place = to_device(dev, logits), loss_ref = zeros(dev, N);
            dev.cross_entropy(loss_ref, in_place, tt, N, V, 0.25f, Tensor{});
            const auto want_loss = from_device(dev, loss_ref);
            // The logits' own view: the same as empty.
            Tensor own = to_device(dev, logits), loss = zeros(dev, N);
            dev.cross_entropy(loss, own, tt, N, V, 0.25f, own);
            CHECK(from_device(dev, own) == from_device(dev, in_place));
            // A separate f32 tensor: the same gradient, the logits unchanged.
            Tensor kept = to_device(dev, logits), grad = zeros(dev, N * V);
            dev.cross_entropy(loss, kept, tt, N, V, 0.25f, grad);
            CHECK(from_device(dev, grad) == from_device(dev, in_place));
            CHECK(from_device(dev, kept) == from_device(dev, to_device(dev, logits)));
            CHECK(from_device(dev, loss) == want_loss);
            // Loss only (grad_scale 0): a given dlogits is left as it was.
            Tensor untouched = zeros(dev, N * V, DType::bf16);
            dev.fill(untouched, 3.0f);
            dev.cross_entropy(loss, kept, tt, N, V, 0.0f, untouched);
            CHECK(from_device(dev, loss) == want_loss);
            const auto bits = bits16(dev, untouched);
            CHECK(std::count(bits.begin(), bits.end(), f32_to_bf16(3.0f)) == N * V);
            for (int64_t offset : {int64_t{0}, int64_t{1}}) {
                check_rounded_output(dev, N * V, offset, "cross_entropy dlogits",
                                     [&](const Tensor& d) {
                                         if (d.dtype == DType::f32) return dev.copy(d, in_place);
                                         dev.cross_entropy(loss, kept, tt, N, V, 0.25f, d);
                                     });
                CHECK(from_device(dev, loss) == want_loss);
            }
        }
    });
}

TEST_CASE("ops: a 16-bit output op refuses an output of another dtype") {
    for_each_test_device([&](Device& dev) {
        Tensor t = zeros(dev, 64), ints = zeros(dev, 64, DType::i32);
        CHECK(error_message([&] { dev.act_fwd(Act::gelu, ints, t, 8); }) ==
              "act_fwd: tensor 'y' is i32, expected f32, bf16 or f16");
        // A 16-bit output over its own input: refused (an f32 one may be the input itself).
        const Tensor h16 = zeros(dev, 64, DType::bf16);
        CHECK(error_message([&] { dev.act_fwd(Act::gelu, h16, h16, 8); }) ==
              "act_fwd: tensor 'x' is bf16, expected f32");
        Tensor both = zeros(dev, 64);
        Tensor as16 = both;
        as16.dtype = DType::bf16;  // the same bytes seen as bf16
        CHECK(error_message([&] { dev.act_bwd(Act::gelu, as16.view(0, {8}), both, t, 8); }) ==
              "act_bwd: the 16-bit 'dx' overlaps 'dy'");
        CHECK(error_message([&] { dev.swiglu_fwd(as16.view(0, {8}), t, both, 8); }) ==
              "swiglu_fwd: the 16-bit 'h' overlaps 'up'");
        CHECK(error_message([&] { dev.rmsnorm_fwd(as16.view(0, {8}), t, both, t, 2, 4, 1e-5f); }) ==
              "rmsnorm_fwd: the 16-bit 'y' overlaps 'x'");
        dev.act_bwd(Act::gelu, t, t, both, 8);  // f32 in place: allowed
        CHECK(error_message([&] { dev.act_bwd(Act::gelu, ints, t, t, 8); }) ==
              "act_bwd: tensor 'dx' is i32, expected f32, bf16 or f16");
        CHECK(error_message([&] { dev.swiglu_fwd(ints, t, t, 8); }) ==
              "swiglu_fwd: tensor 'h' is i32, expected f32, bf16 or f16");
        CHECK(error_message([&] { dev.rmsnorm_fwd(ints, t, t, t, 2, 4, 1e-5f); }) ==
              "rmsnorm_fwd: tensor 'y' is i32, expected f32, bf16 or f16");
        CHECK(error_message([&] {
                  dev.layernorm_fwd(zeros(dev, 4, DType::bf16), t, t, t, t, Tensor{}, 2, 4, 1e-5f);
              }) == "layernorm_fwd: tensor 'y' has 4 elements, the op needs 8");
        Tensor targets = to_device(dev, std::vector<int32_t>{0, 1});
        CHECK(error_message([&] { dev.cross_entropy(t, t, targets, 2, 4, 1.0f, ints); }) ==
              "cross_entropy: tensor 'dlogits' is i32, expected f32, bf16 or f16");
        CHECK(
            error_message([&] { dev.cross_entropy(t, t, targets, 2, 4, 1.0f, t.view(1, {8})); }) ==
            "cross_entropy: dlogits overlaps the logits (pass the logits themselves, or a "
            "separate tensor)");
    });
}
