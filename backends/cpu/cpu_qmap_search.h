// The nearest-code search of mt_qmap_encode (backends/shared/mt_math.h) for the CPU backend,
// as two table lookups instead of an 8-step binary search with unpredictable branches (~5x
// faster). The code of x is a non-decreasing step function of x that rises by one at each of
// 255 transition points, so cutting the floats into buckets that hold at most one transition
// each gives code(x) = code[b] + (x >= threshold[b]). A bucket is the sign, the exponent and the
// top 7 mantissa bits of x (magnitudes clamped to [2^-24, 2)); the tables are built from the
// map with mt_qmap_encode itself, and building fails if a bucket would hold two transitions.
// tests/test_ops_adamw8bit.cpp compares the two searches on every transition and bucket edge.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace moetrain::cpu {

class QmapSearch {
  public:
    explicit QmapSearch(const float* map);  // map: 256 ascending values (one of the two maps)

    // mt_qmap_encode(map, x), bit for bit (NaN gives 0, as the binary search does).
    int encode(float x) const {
        if (x != x) return 0;
        uint32_t u;
        std::memcpy(&u, &x, sizeof u);
        uint32_t a = u & 0x7fffffffu;
        a = a < kLo ? kLo : a > kHi ? kHi : a;
        const size_t b = ((a - kLo) >> kShift) + (u >> 31 ? kBuckets : 0);
        return code_[b] + (x >= threshold_[b] ? 1 : 0);
    }

    // Buckets per sign and the magnitude bits of bucket b's smallest and largest member.
    static constexpr uint32_t kLo = 103u << 23, kHi = (128u << 23) - 1;  // 2^-24 .. 2 - ulp
    static constexpr int kShift = 23 - 7;
    static constexpr size_t kBuckets = ((kHi - kLo) >> kShift) + 1;
    static uint32_t bucket_min(size_t b) { return b == 0 ? 0u : kLo + uint32_t(b << kShift); }
    static uint32_t bucket_max(size_t b) {
        return b + 1 == kBuckets ? 0x7f800000u : kLo + uint32_t((b + 1) << kShift) - 1;
    }

  private:
    std::vector<uint8_t> code_;     // the code of the bucket's lowest value
    std::vector<float> threshold_;  // the lowest value with the next code (NaN: none)
};

}  // namespace moetrain::cpu
