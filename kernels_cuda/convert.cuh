// Float format conversion between f32, bf16 and f16 buffers (round to nearest even), one
// element per thread and step. 16-bit values are stored as their bit patterns (uint16_t).
// Streams whole tensors (the 16-bit GEMM operands): four elements per access where both
// pointers allow (float4 / 8 bytes of 16-bit values, vector_access.cuh's load_as_f32 /
// store_from_f32), one at a time elsewhere, the same rounding on both paths.
#pragma once

#include "common.cuh"
#include "vector_access.cuh"

namespace mtk {

__global__ void convert_kernel(void* dst, int dst_kind, const void* src, int src_kind, VecSplit s) {
    for_split_grid(s, [&](auto w, int64_t i) {
        store_from_f32(w, dst, dst_kind, i, load_as_f32(w, src, src_kind, i));
    });
}

void convert(Stream s, void* dst, FloatKind dst_kind, const void* src, FloatKind src_kind,
             int64_t n) {
    if (n <= 0) return;
    const int dk = static_cast<int>(dst_kind), sk = static_cast<int>(src_kind);
    const VecSplit sp = vec_split(n, VecPtr{dst, kind_bytes(dk)}, VecPtr{src, kind_bytes(sk)});
    MT_LAUNCH(convert_kernel, elementwise(sp.groups, vec_singles(sp)), s, dst, dk, src, sk, sp);
}

}  // namespace mtk
