// CudaDevice ops: the bias gradient, sum and sum of squares (deterministic partial sums in context
// scratch). Each turns its tensors into pointers and calls the launcher of reduce.cuh on the device
// stream (docs/CUDA.md).
#include "reduce.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::bias_grad_impl(const Tensor& dbias, const Tensor& dy, int64_t rows, int64_t cols) {
    float* db = f32(dbias);
    auto* tmp = static_cast<float*>(scratch(mtk::colsum_scratch_bytes(rows, cols)));
    mtk::bias_grad(stream("bias_grad"), db, raw(dy), rows, cols, tmp, float_kind(dy.dtype));
    launched("bias_grad");
}

void CudaDevice::sum_impl(const Tensor& out, const Tensor& x, int64_t n, float scale,
                          bool accumulate) {
    float* o = f32(out);
    const float* px = f32(x);
    auto* tmp = static_cast<float*>(scratch(mtk::reduce_scratch_bytes(n)));
    mtk::sum(stream("sum"), o, px, n, scale, accumulate, tmp);
    launched("sum");
}

void CudaDevice::sum_squares_impl(const Tensor& out, const Tensor& x, int64_t n, bool accumulate) {
    float* o = f32(out);
    const float* px = f32(x);
    auto* tmp = static_cast<float*>(scratch(mtk::reduce_scratch_bytes(n)));
    mtk::sum_squares(stream("sum_squares"), o, px, n, accumulate, tmp);
    launched("sum_squares");
}

}  // namespace moetrain::cuda
