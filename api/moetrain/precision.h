// Training / inference precision: fp32, or bf16 / fp16 matrix products with fp32
// accumulation on a 16-bit working copy of the weight matrices, fp32 master weights and fp32
// optimizer math. fp16 training uses dynamic loss scaling (moetrain::Trainer).
#pragma once

#include <string>

#include "moetrain/dtype.h"
#include "moetrain/error.h"

namespace moetrain {

enum class Precision { fp32, bf16, fp16 };

inline const char* precision_name(Precision p) {
    switch (p) {
        case Precision::fp32:
            return "fp32";
        case Precision::bf16:
            return "bf16";
        case Precision::fp16:
            return "fp16";
    }
    return "?";
}

inline Precision parse_precision(const std::string& s) {
    if (s == "fp32") return Precision::fp32;
    if (s == "bf16") return Precision::bf16;
    if (s == "fp16") return Precision::fp16;
    fail("unknown precision '", s, "' (fp32, bf16, fp16)");
}

// The element type matrix products round their operands to.
inline DType compute_dtype(Precision p) {
    return p == Precision::bf16 ? DType::bf16 : p == Precision::fp16 ? DType::f16 : DType::f32;
}

}  // namespace moetrain
