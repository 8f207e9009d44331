// Branch-free forms of the dtype.h 16-bit conversions (round to nearest even), written with
// selects instead of branches and loops so that GCC vectorises the loops that call them (the
// operand packing of the 16-bit GEMMs). Bit-identical to dtype.h for every f32 input, NaN
// included (tests/test_ops_gemm16.cpp checks them against dtype.h).
#pragma once

#include <bit>
#include <cstdint>

namespace moetrain::cpu {

// c ? x : y as mask arithmetic (a ternary between values computed with floating-point ops
// may be turned back into a branch, which stops GCC from vectorising the loop).
inline uint32_t select_u32(bool c, uint32_t x, uint32_t y) {
    const uint32_t mask = 0u - static_cast<uint32_t>(c);
    return (x & mask) | (y & ~mask);
}

// f32 -> bf16 bits, as f32_to_bf16.
inline uint16_t bf16_bits(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x40u;
    return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float bf16_value(uint16_t h) {
    return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// f32 -> nearest bf16 value, as bf16_to_f32(f32_to_bf16(f)).
inline float round_bf16(float f) {
    return bf16_value(bf16_bits(f));
}

// f32 -> nearest f16 value, as f16_to_f32(f32_to_f16(f)): normal halves round the f32
// mantissa to 10 bits; below 2^-14 the half grid is fixed (multiples of 2^-24), which
// (|f| + 0.5) - 0.5 rounds to in the default rounding mode; 65520 and above overflow to Inf.
inline float round_f16(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint32_t sign = u & 0x80000000u, a = u & 0x7fffffffu;
    const uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;
    const uint32_t subnormal = std::bit_cast<uint32_t>((std::bit_cast<float>(a) + 0.5f) - 0.5f);
    uint32_t r = select_u32(a < 0x38800000u, subnormal, normal);
    r = select_u32(a >= 0x477ff000u, 0x7f800000u, r);
    r = select_u32(a > 0x7f800000u, 0x7fc00000u, r);
    return std::bit_cast<float>(sign | r);
}

// f16 bits -> f32, as f16_to_f32 (subnormals are mant * 2^-24, exact in f32).
inline float f16_value(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    const uint32_t normal = ((exp + 112u) << 23) | (mant << 13);
    const uint32_t special = 0x7f800000u | (mant << 13);
    const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(mant) * 0x1p-24f);
    const uint32_t r = select_u32(exp == 0, subnormal, select_u32(exp == 31, special, normal));
    return std::bit_cast<float>(sign | r);
}

}  // namespace moetrain::cpu
