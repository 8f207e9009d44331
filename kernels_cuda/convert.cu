// CudaDevice ops: f32 / bf16 / f16 conversion, and the 16-bit operand copies of the products. Each
// turns its tensors into pointers and calls the launcher of convert.cuh on the device stream
// (docs/CUDA.md).
#include "convert.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::convert_impl(const Tensor& dst, const Tensor& src) {
    auto kind = [](DType t, const char* which) {
        MT_CHECK(t == DType::f32 || t == DType::bf16 || t == DType::f16, "convert: ", which, " is ",
                 dtype_name(t), " (f32 / bf16 / f16 only)");
        return float_kind(t);
    };
    mtk::FloatKind dk = kind(dst.dtype, "destination"), sk = kind(src.dtype, "source");
    void* d = raw(dst);
    const void* s = raw(src);
    mtk::convert(stream("convert"), d, dk, s, sk, dst.numel());
    launched("convert");
}

void CudaDevice::round_operand(void* dst, DType compute, const void* src, int64_t n) {
    mtk::convert(stream("gemm"), dst, float_kind(compute), src, mtk::FloatKind::f32, n);
}

void CudaDevice::widen_operand(float* dst, DType from, const void* src, int64_t n) {
    mtk::convert(stream("attention"), dst, mtk::FloatKind::f32, src, float_kind(from), n);
}

}  // namespace moetrain::cuda
