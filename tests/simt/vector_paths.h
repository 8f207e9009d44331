// Test helpers for the kernels with 16-byte accesses (kernels_cuda/vector_access.cuh): each op
// runs with its arguments placed at several element offsets from a 16-byte boundary, so both
// paths run — "aligned" (groups from element 0), "offset 1" / "offset 3" (a single-element
// head, then groups), "mismatched" (the first argument aligned, the others at offset 1: no
// common alignment, every element on the single-element path). across_placements runs the op
// under two schedules per placement, requires bit-identical results over all placements (the
// vector and single-element paths compute the same floats), checks from the harness's count of
// vector accesses which path ran, and returns the result for the reference comparison.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "harness_util.h"
#include "simt.h"

namespace simt_test {

struct Placement {
    const char* name;
    int64_t first, rest;  // element offsets of the first argument and of all others
    int64_t offset(int arg) const { return arg == 0 ? first : rest; }
};
inline const std::vector<Placement>& placements() {
    static const std::vector<Placement> p = {
        {"aligned", 0, 0}, {"offset 1", 1, 1}, {"offset 3", 3, 3}, {"mismatched", 0, 1}};
    return p;
}

// Lengths for the placement tests: too short for a group, multiples of 4, odd.
inline const std::vector<int64_t>& vector_sizes() {
    static const std::vector<int64_t> s = {1, 3, 4, 7, 64, 1027, 4100};
    return s;
}

// A copy of `values` starting `offset` elements past a 16-byte boundary, with guard bytes
// around it; values() returns the elements and CHECKs that nothing outside them was written.
template <typename T>
class Placed {
  public:
    Placed(const std::vector<T>& values, int64_t offset)
        : n_(static_cast<int64_t>(values.size())), buf_(values.size() + offset + 2 * kGuard) {
        std::memset(static_cast<void*>(buf_.data()), kGuardByte, buf_.size() * sizeof(T));
        int64_t start = 0;  // first element of buf_ on a 16-byte boundary
        while (reinterpret_cast<uintptr_t>(buf_.data() + start) % 16 != 0) ++start;
        begin_ = start + kGuard / 2 + offset;
        if (n_ > 0)
            std::memcpy(static_cast<void*>(data()), values.data(), values.size() * sizeof(T));
    }
    T* data() { return buf_.data() + begin_; }
    std::vector<T> values() const {
        const auto* bytes = reinterpret_cast<const unsigned char*>(buf_.data());
        const size_t lo = static_cast<size_t>(begin_) * sizeof(T),
                     hi = lo + static_cast<size_t>(n_) * sizeof(T);
        bool intact = true;
        for (size_t b = 0; b < buf_.size() * sizeof(T); ++b)
            if ((b < lo || b >= hi) && bytes[b] != kGuardByte) intact = false;
        CHECK_MESSAGE(intact, "a kernel wrote outside its argument");
        return std::vector<T>(buf_.begin() + begin_, buf_.begin() + begin_ + n_);
    }

  private:
    static constexpr int64_t kGuard = 32;  // elements, covers the 16-byte alignment search too
    static constexpr unsigned char kGuardByte = 0x5a;
    int64_t n_, begin_ = 0;
    std::vector<T> buf_;
};

// Bitwise equality of results: vectors, pairs and tuples of them.
template <typename A, typename B>
bool same_bits(const std::pair<A, B>& x, const std::pair<A, B>& y) {
    return same_bits(x.first, y.first) && same_bits(x.second, y.second);
}
template <typename... T>
bool same_bits(const std::tuple<T...>& x, const std::tuple<T...>& y) {
    return std::apply(
        [&](const auto&... a) {
            return std::apply([&](const auto&... b) { return (same_bits(a, b) && ...); }, y);
        },
        x);
}

// Whether a placement can use groups of `width` elements on a range of n elements whose
// arguments all start at its offsets (one-argument ops: the first offset only).
inline bool groups_possible(const Placement& p, int64_t n, int64_t width,
                            bool one_argument = false) {
    if (!one_argument && p.first % width != p.rest % width) return false;
    const int64_t head = (width - p.first % width) % width;
    return n - head >= width;
}

// Runs op(placement) -> result under two schedules for every placement; CHECKs bit-identical
// results across placements and, per placement, that vector accesses happened exactly when
// vectors(placement) says they can. Returns the result of the first placement.
template <typename Op, typename Vectors>
auto across_placements(const std::string& what, Op op, Vectors vectors) {
    using Result = decltype(op(placements()[0]));
    std::optional<Result> first;
    for (const Placement& p : placements()) {
        const uint64_t before = simt::vector_accesses();
        Result got = two_schedules(what + " (" + p.name + ")", [&] { return op(p); });
        const bool used = simt::vector_accesses() != before;
        INFO(what << ", " << p.name << " arguments");
        CHECK_MESSAGE(used == vectors(p), (used ? "vector accesses where none were possible"
                                                : "no vector access where groups fit"));
        if (!first)
            first = got;
        else
            CHECK_MESSAGE(same_bits(got, *first), "the result differs from the aligned run's bits");
    }
    return *first;
}

}  // namespace simt_test
