// Builds the bucket tables of QmapSearch (cpu_qmap_search.h) from mt_qmap_encode.
#include "cpu/cpu_qmap_search.h"

#include <cmath>

#include "moetrain/error.h"
#include "shared/mt_math.h"

namespace moetrain::cpu {
namespace {
float from_bits(uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}
}  // namespace

QmapSearch::QmapSearch(const float* map)
    : code_(2 * kBuckets), threshold_(2 * kBuckets, std::nanf("")) {
    for (size_t b = 0; b < kBuckets; ++b) {
        const uint32_t lo = bucket_min(b), hi = bucket_max(b);
        for (int negative = 0; negative < 2; ++negative) {
            const uint32_t sign = negative ? 0x80000000u : 0u;
            // Values ascend with the magnitude for +, against it for -.
            const uint32_t first = negative ? hi : lo, last = negative ? lo : hi;
            const int c_lo = mt_qmap_encode(map, from_bits(sign | first));
            const int c_hi = mt_qmap_encode(map, from_bits(sign | last));
            const size_t slot = b + (negative ? kBuckets : 0);
            code_[slot] = static_cast<uint8_t>(c_lo);
            MT_CHECK(c_hi - c_lo <= 1, "adamw8bit: quantisation bucket ", b,
                     " holds more than one code transition");
            if (c_hi == c_lo) continue;
            // The transition: the magnitude where the code flips, by bisection (the code is
            // monotone in the value, hence in the magnitude within one sign).
            uint32_t l = lo, h = hi;  // + : smallest with c_hi; - : largest with c_hi
            while (l < h) {
                const uint32_t mid = negative ? l + (h - l + 1) / 2 : l + (h - l) / 2;
                const bool high = mt_qmap_encode(map, from_bits(sign | mid)) == c_hi;
                if (negative) {
                    if (high)
                        l = mid;
                    else
                        h = mid - 1;
                } else {
                    if (high)
                        h = mid;
                    else
                        l = mid + 1;
                }
            }
            threshold_[slot] = from_bits(sign | l);
        }
    }
}

}  // namespace moetrain::cpu
