// Float format conversion between f32, bf16 and f16 buffers (round to nearest even), one
// thread per element. 16-bit values are stored as their bit patterns (uint16_t).
#pragma once

#include "common.cuh"

namespace mtk {

__device__ __forceinline__ float load_as_f32(const void* src, int kind, int64_t i) {
    if (kind == 0) return static_cast<const float*>(src)[i];
    uint16_t h = static_cast<const uint16_t*>(src)[i];
    return kind == 1 ? bf16_bits_to_f32(h) : f16_bits_to_f32(h);
}

__global__ void convert_kernel(void* dst, int dst_kind, const void* src, int src_kind, int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        float v = load_as_f32(src, src_kind, i);
        if (dst_kind == 0)
            static_cast<float*>(dst)[i] = v;
        else
            static_cast<uint16_t*>(dst)[i] = dst_kind == 1 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
    }
}

void convert(Stream s, void* dst, FloatKind dst_kind, const void* src, FloatKind src_kind,
             int64_t n) {
    if (n > 0)
        MT_LAUNCH(convert_kernel, elementwise(n), s, dst, static_cast<int>(dst_kind), src,
                  static_cast<int>(src_kind), n);
}

}  // namespace mtk
