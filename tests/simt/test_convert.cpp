// Harness tests of kernels_cuda/convert.cuh: f32 -> bf16 / f16 (round to nearest even, ties,
// overflow, subnormals) and back, and bf16 <-> f16, against the reference rounding.
#include "harness_util.h"
#include "convert.cuh"

using namespace simt_test;
namespace ref = moetrain::ref;
using moetrain::DType;

TEST_CASE("simt: convert between f32, bf16 and f16") {
    Rng rng(3);
    Vec x = rng.normal(1023, 100.0);
    // Exact ties, huge, tiny and subnormal values.
    Vec special = {0.0, -0.0, 1.0 + 1.0 / 256, 1.0 + 3.0 / 256, 65504.0, 70000.0, -1e30, 6e-8, 1e-40, 3.0e-5};
    for (double v : special) x.push_back(static_cast<float>(v));
    const int64_t n = static_cast<int64_t>(x.size());
    for (auto [kind, dt] : {std::pair{mtk::FloatKind::bf16, DType::bf16}, {mtk::FloatKind::f16, DType::f16}}) {
        CAPTURE(static_cast<int>(dt));
        auto got = two_schedules("convert", [&] {
            FVec fx = to_f32(x), back(n), f32copy(n);
            std::vector<uint16_t> h(n);
            mtk::convert(nullptr, h.data(), kind, fx.data(), mtk::FloatKind::f32, n);
            mtk::convert(nullptr, back.data(), mtk::FloatKind::f32, h.data(), kind, n);
            mtk::convert(nullptr, f32copy.data(), mtk::FloatKind::f32, fx.data(), mtk::FloatKind::f32, n);
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
        REQUIRE(back[i] == static_cast<float>(ref::round_to(ref::round_to(x[i], DType::bf16), DType::f16)));
}
