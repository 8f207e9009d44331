// Vectorisable float32 exp and tanh for the CPU backend's element-wise loops. glibc's expf /
// tanhf are scalar calls that stop GCC from vectorising a loop (and tanhf costs ~20 ns); these
// are branch-free inline functions (Cody-Waite range reduction + the Cephes polynomials,
// <= 2 ulp on the whole range, NaN and +-inf handled like the libm functions) that GCC turns
// into AVX2 / AVX-512 code inside `#pragma omp simd` loops.
//
// Including this header before shared/mt_math.h makes the shared activation formulas
// (mt_silu, mt_gelu, ... ) use them: the formulas stay the shared ones, only the elementary
// functions change. Every lane of a vector computes exactly what the scalar code computes
// (no FMA contraction under -std=c++20), so results do not depend on where a loop is split.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace moetrain::cpu {

inline float bits_to_float(int32_t i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}

inline int32_t float_to_bits(float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i;
}

// c ? a : b as a bit blend: both values are computed unconditionally, so GCC cannot sink one
// of them into a branch (which would then keep the loop from vectorising).
inline float blend(bool c, float a, float b) {
    const int32_t m = -static_cast<int32_t>(c);
    return bits_to_float((float_to_bits(a) & m) | (float_to_bits(b) & ~m));
}

// e^x. Below -104 the result is 0, above 89 it is +inf (as expf rounds), NaN stays NaN.
inline float exp_f32(float x) {
    float xc = blend(std::isgreater(x, -104.0f), x, -104.0f);  // NaN -> -104; restored below
    xc = blend(std::isless(xc, 89.0f), xc, 89.0f);
    // n = round(x / ln 2) by the 1.5 * 2^23 shift (round to nearest even, exact here).
    const float shifted = xc * 1.44269504088896341f + 12582912.0f;
    const float n = shifted - 12582912.0f;
    // r = x - n ln2 in two steps (Cody-Waite: ln2_hi has 9 trailing zero bits, exact products).
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    // e^r on [-ln2/2, ln2/2] (Cephes expf minimax polynomial).
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    // 2^n as two normal powers (n in [-150, 129]) so that subnormal results and overflow to
    // +inf round like a single scaling would.
    const int32_t ni = static_cast<int32_t>(n);
    const int32_t n1 = ni / 2, n2 = ni - n1;
    const float s1 = bits_to_float((n1 + 127) << 23), s2 = bits_to_float((n2 + 127) << 23);
    const float y = p * s1 * s2;
    return blend(std::isunordered(x, x), x, y);
}

// tanh(x): an odd polynomial for |x| < 0.625, 1 - 2 / (e^{2|x|} + 1) with the sign above.
inline float tanh_f32(float x) {
    const float ax = std::fabs(x);
    const float z = x * x;
    float p = -5.70498872745e-3f;  // Cephes tanhf
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    const float small = p * z * x + x;
    const float big = 1.0f - 2.0f / (exp_f32(ax + ax) + 1.0f);
    const float signed_big = std::copysign(big, x);
    return blend(std::isless(ax, 0.625f), small, signed_big);
}

}  // namespace moetrain::cpu

// The shared per-element formulas of mt_math.h call these from here on (this translation unit).
#ifndef MOETRAIN_MT_MATH_H
#define mt_expf(x) ::moetrain::cpu::exp_f32(x)
#define mt_tanhf(x) ::moetrain::cpu::tanh_f32(x)
#endif
