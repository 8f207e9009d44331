// CudaDevice ops: cross-entropy with the logits gradient (in place or into a 16-bit dlogits). Each
// turns its tensors into pointers and calls the launcher of loss.cuh on the device stream
// (docs/CUDA.md).
#include "loss.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::cross_entropy_impl(const Tensor& losses, const Tensor& logits,
                                    const Tensor& targets, int64_t N, int64_t V, float grad_scale,
                                    const Tensor& dlogits) {
    const char* op = "cross_entropy";
    mtk::cross_entropy(stream(op), f32(losses), f32(logits), i32(targets), N, V, grad_scale,
                       error_word(), dlogits ? raw(dlogits) : nullptr,
                       dlogits ? float_kind(dlogits.dtype) : mtk::FloatKind::f32);
    launched(op);
    check_device_error();  // a bad target must fail here, not at a later download
}

}  // namespace moetrain::cuda
