// Helpers for the harness tests of kernels_cuda/: host buffers standing in for device memory,
// and `two_schedules`, which runs one op under two different thread interleavings, requires
// bit-identical results (a race shows up as a difference) and returns them for comparison
// with the float64 reference (tests/reference_ops.h, tolerances via tests/op_test_util.h).
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "op_test_util.h"
#include "reference_ops.h"
#include "simt.h"

namespace simt_test {

using moetrain::test::Rng;
using moetrain::test::Tol;
using Vec = std::vector<double>;
using IVec = std::vector<int32_t>;
using FVec = std::vector<float>;

// The two interleavings every kernel runs under (both shuffle thread and block order).
constexpr uint64_t kSeeds[2] = {0x5eed1, 0x5eed2};

inline FVec to_f32(const Vec& v) {
    return FVec(v.begin(), v.end());
}
inline Vec to_f64(const FVec& v) {
    return Vec(v.begin(), v.end());
}

// Bitwise equality of two results of the same op (NaN == NaN when the bits agree).
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// The bits of f32 values rounded to bf16 (or f16), dtype.h's round to nearest even: what an op's
// 16-bit output must hold.
inline std::vector<uint16_t> rounded16(const FVec& v, bool bf16) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        h[i] = bf16 ? moetrain::f32_to_bf16(v[i]) : moetrain::f32_to_f16(v[i]);
    return h;
}

// Runs op(seed) -> Result under both schedules; CHECKs the results are bit-identical (Result
// must be comparable with ==, e.g. a tuple of vectors) and returns the first one.
template <typename Op>
auto two_schedules(const std::string& what, Op op) {
    simt::set_seed(kSeeds[0]);
    auto first = op();
    simt::set_seed(kSeeds[1]);
    auto second = op();
    simt::set_seed(0);
    INFO(what << ": result differs between two thread interleavings (a race)");
    CHECK(first == second);
    return first;
}

// Runs body(rows, cols, rng) for each (rows, cols) shape, both captured for failures, with rng
// seeded rows * seed_rows + cols.
using Shapes = std::vector<std::pair<int64_t, int64_t>>;
template <typename Body>
void for_each_shape(const Shapes& shapes, int64_t seed_rows, Body&& body) {
    for (auto [rows, cols] : shapes) {
        CAPTURE(rows);
        CAPTURE(cols);
        Rng rng(static_cast<uint64_t>(rows * seed_rows + cols));
        body(rows, cols, rng);
    }
}

inline void check_close(const FVec& got, const Vec& want, Tol tol, const std::string& what) {
    moetrain::test::check_close(to_f64(got), want, tol, what);
}

}  // namespace simt_test
