// Element types a device buffer can hold, with host-side conversions for the 16-bit floats.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "moetrain/enum_names.h"

namespace moetrain {

enum class DType : uint8_t { f32 = 0, bf16 = 1, f16 = 2, i32 = 3, u8 = 4 };

inline size_t dtype_size(DType t) {
    switch (t) {
        case DType::f32:
        case DType::i32:
            return 4;
        case DType::bf16:
        case DType::f16:
            return 2;
        case DType::u8:
            return 1;
    }
    return 0;
}

inline constexpr EnumName<DType> kDtypeNames[] = {{DType::f32, "f32"},
                                                  {DType::bf16, "bf16"},
                                                  {DType::f16, "f16"},
                                                  {DType::i32, "i32"},
                                                  {DType::u8, "u8"}};

inline const char* dtype_name(DType t) {
    return enum_name(kDtypeNames, t);
}

// bf16 <-> f32 (round to nearest even; NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// IEEE half <-> f32 (round to nearest even, handles subnormals, Inf, NaN).
inline uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> Inf
    if (absx < 0x38800000u) {                                               // subnormal or zero
        if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
        uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
        int shift = 113 - static_cast<int>(absx >> 23) + 13;
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t h = ((absx - 0x38000000u) >> 13);
    uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return static_cast<uint16_t>(sign | h);
}
inline float f16_to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (mant == 0) {
            u = sign;
        } else {  // subnormal: normalise
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            u = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (mant << 13);
    } else {
        u = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace moetrain
