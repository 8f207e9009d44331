// Training / inference precision: fp32, or bf16 / fp16 matrix products with fp32
// accumulation on a 16-bit working copy of the weight matrices, fp32 master weights and fp32
// optimizer math. fp16 training uses dynamic loss scaling (moetrain::Trainer).
#pragma once

#include <string>

#include "moetrain/dtype.h"
#include "moetrain/enum_names.h"
#include "moetrain/error.h"

namespace moetrain {

enum class Precision { fp32, bf16, fp16 };

inline constexpr EnumName<Precision> kPrecisionNames[] = {
    {Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}, {Precision::fp16, "fp16"}};

inline const char* precision_name(Precision p) {
    return enum_name(kPrecisionNames, p);
}

inline Precision parse_precision(const std::string& s) {
    if (auto p = enum_value(kPrecisionNames, s)) return *p;
    fail("unknown precision '", s, "' (", enum_name_list(kPrecisionNames), ")");
}

// The element type matrix products round their operands to.
inline DType compute_dtype(Precision p) {
    return p == Precision::bf16 ? DType::bf16 : p == Precision::fp16 ? DType::f16 : DType::f32;
}

}  // namespace moetrain
