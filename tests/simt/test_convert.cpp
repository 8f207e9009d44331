// Harness tests of kernels_cuda/convert.cuh: f32 -> bf16 / f16 (round to nearest even, ties,
// overflow, subnormals) and back, and bf16 <-> f16, against the reference rounding; and every
// direction with its arguments aligned, at element offsets and mismatched (the 16-byte and the
// single-element paths, vector_paths.h).
#include "harness_util.h"
#include "convert.cuh"
// after the kernels:
#include <type_traits>

#include "vector_paths.h"

using namespace simt_test;
namespace ref = moetrain::ref;
using moetrain::DType;

TEST_CASE("simt: convert between f32, bf16 and f16") {
    Rng rng(3);
    Vec x = rng.normal(1023, 100.0);
    // Exact ties, huge, tiny and subnormal values.
    Vec special = {0.0,   -0.0, 1.0 + 1.0 / 256, 1.0 + 3.0 / 256, 65504.0, 70000.0,
                   -1e30, 6e-8, 1e-40,           3.0e-5};
    for (double v : special) x.push_back(static_cast<float>(v));
    const int64_t n = static_cast<int64_t>(x.size());
    for (auto [kind, dt] :
         {std::pair{mtk::FloatKind::bf16, DType::bf16}, {mtk::FloatKind::f16, DType::f16}}) {
        CAPTURE(static_cast<int>(dt));
        auto got = two_schedules("convert", [&] {
            FVec fx = to_f32(x), back(n), f32copy(n);
            std::vector<uint16_t> h(n);
            mtk::convert(nullptr, h.data(), kind, fx.data(), mtk::FloatKind::f32, n);
            mtk::convert(nullptr, back.data(), mtk::FloatKind::f32, h.data(), kind, n);
            mtk::convert(nullptr, f32copy.data(), mtk::FloatKind::f32, fx.data(),
                         mtk::FloatKind::f32, n);
            return std::make_pair(back, f32copy);
        });
        Vec want(n);
        for (int64_t i = 0; i < n; ++i) want[i] = ref::round_to(x[i], dt);
        for (int64_t i = 0; i < n; ++i) {
            CAPTURE(x[i]);
            REQUIRE(got.first[i] == static_cast<float>(want[i]));
        }
        check_close(got.second, x, Tol{0, 0}, "f32 -> f32");
    }
    // bf16 -> f16 -> f32 equals rounding the bf16 value to f16.
    FVec fx = to_f32(x), back(n);
    std::vector<uint16_t> b(n), h(n);
    mtk::convert(nullptr, b.data(), mtk::FloatKind::bf16, fx.data(), mtk::FloatKind::f32, n);
    mtk::convert(nullptr, h.data(), mtk::FloatKind::f16, b.data(), mtk::FloatKind::bf16, n);
    mtk::convert(nullptr, back.data(), mtk::FloatKind::f32, h.data(), mtk::FloatKind::f16, n);
    for (int64_t i = 0; i < n; ++i)
        REQUIRE(back[i] ==
                static_cast<float>(ref::round_to(ref::round_to(x[i], DType::bf16), DType::f16)));
}

TEST_CASE("simt: convert on aligned, offset and mismatched arguments") {
    using mtk::FloatKind;
    for (int64_t n : vector_sizes()) {
        CAPTURE(n);
        Rng rng(static_cast<uint64_t>(n) + 21);
        Vec x = rng.normal(n, 100.0);
        FVec fx = to_f32(x);
        std::vector<uint16_t> b(n), h(n);
        for (int64_t i = 0; i < n; ++i) {
            b[i] = moetrain::f32_to_bf16(fx[i]);
            h[i] = moetrain::f32_to_f16(fx[i]);
        }
        auto groups = [&](const Placement& p) { return groups_possible(p, n, 4); };
        // dst: argument 0, src: argument 1; every result is checked against the host rounding.
        auto to16 = [&](FloatKind kind, const auto& src, FloatKind src_kind) {
            return across_placements(
                "convert to 16-bit",
                [&](const Placement& p) {
                    Placed<uint16_t> out(std::vector<uint16_t>(n, 0), p.offset(0));
                    Placed<typename std::decay_t<decltype(src)>::value_type> in(src, p.offset(1));
                    mtk::convert(nullptr, out.data(), kind, in.data(), src_kind, n);
                    return out.values();
                },
                groups);
        };
        auto to32 = [&](const auto& src, FloatKind src_kind) {
            return across_placements(
                "convert to f32",
                [&](const Placement& p) {
                    Placed<float> out(FVec(n, 0.0f), p.offset(0));
                    Placed<typename std::decay_t<decltype(src)>::value_type> in(src, p.offset(1));
                    mtk::convert(nullptr, out.data(), FloatKind::f32, in.data(), src_kind, n);
                    return out.values();
                },
                groups);
        };
        CHECK(to16(FloatKind::bf16, fx, FloatKind::f32) == b);
        CHECK(to16(FloatKind::f16, fx, FloatKind::f32) == h);
        std::vector<uint16_t> bh(n);  // bf16 -> f16
        FVec fb(n), fh(n);
        for (int64_t i = 0; i < n; ++i) {
            fb[i] = moetrain::bf16_to_f32(b[i]);
            fh[i] = moetrain::f16_to_f32(h[i]);
            bh[i] = moetrain::f32_to_f16(fb[i]);
        }
        CHECK(to16(FloatKind::f16, b, FloatKind::bf16) == bh);
        CHECK(same_bits(to32(b, FloatKind::bf16), fb));
        CHECK(same_bits(to32(h, FloatKind::f16), fh));
        CHECK(same_bits(to32(fx, FloatKind::f32), fx));
    }
}
