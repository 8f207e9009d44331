// CudaDevice ops: fill (any dtype, as its bit pattern), add, axpby and add_bias, and add_f32
// (gemm_epilogue's bias gradient). Each turns its tensors into pointers and calls the launcher
// of elementwise.cuh on the device stream (docs/CUDA.md).
#include <cstring>

#include "elementwise.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::fill_impl(const Tensor& dst, float value) {
    void* d = raw(dst);
    uint32_t bits = 0;
    int width = static_cast<int>(dtype_size(dst.dtype));
    switch (dst.dtype) {
        case DType::f32:
            std::memcpy(&bits, &value, 4);
            break;
        case DType::bf16:
            bits = f32_to_bf16(value);
            break;
        case DType::f16:
            bits = f32_to_f16(value);
            break;
        case DType::i32:
            bits = static_cast<uint32_t>(static_cast<int32_t>(value));
            break;
        case DType::u8:
            bits = static_cast<uint8_t>(static_cast<int32_t>(value));
            break;
    }
    mtk::fill(stream("fill"), d, width, bits, dst.numel());
    launched("fill");
}

void CudaDevice::add_impl(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) {
    mtk::add(stream("add"), f32(out), f32(a), f32(b), n);
    launched("add");
}

void CudaDevice::add_f32(float* y, const float* x, int64_t n) {
    mtk::add(stream("gemm_epilogue"), y, y, x, n);
    launched("gemm_epilogue");
}

void CudaDevice::axpby_impl(const Tensor& y, float alpha, const Tensor& x, float beta, int64_t n) {
    mtk::axpby(stream("axpby"), f32(y), alpha, f32(x), beta, n);
    launched("axpby");
}

void CudaDevice::add_bias_impl(const Tensor& y, const Tensor& bias, int64_t rows, int64_t cols) {
    mtk::add_bias(stream("add_bias"), f32(y), f32(bias), rows, cols);
    launched("add_bias");
}

}  // namespace moetrain::cuda
