// The 8-bit AdamW quantisation maps of mt_math.h (signed map, then unsigned map) as one host
// table, built once per process. The CPU backend reads it directly; the OpenCL and CUDA
// backends copy it to the device ahead of each adamw8bit launch, so every backend quantises
// against bit-identical maps.
#pragma once

#include <array>

#include "shared/mt_math.h"

namespace moetrain {

inline const float* qmap_host_table() {
    static const std::array<float, MT_QMAP_LEN> table = [] {
        std::array<float, MT_QMAP_LEN> t{};
        mt_qmap_fill(t.data());
        return t;
    }();
    return table.data();
}

}  // namespace moetrain
