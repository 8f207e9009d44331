// CudaDevice ops: activations, SwiGLU and the row softmax. Each turns its tensors into pointers and
// calls the launcher of activations.cuh on the device stream (docs/CUDA.md).
#include "activations.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

static_assert(static_cast<int>(Act::gelu) == static_cast<int>(mtk::ActKind::gelu) &&
                  static_cast<int>(Act::relu) == static_cast<int>(mtk::ActKind::relu) &&
                  static_cast<int>(Act::silu) == static_cast<int>(mtk::ActKind::silu),
              "mtk::ActKind mirrors moetrain::Act");

void CudaDevice::act_fwd_impl(Act act, const Tensor& y, const Tensor& x, int64_t n) {
    mtk::act_fwd(stream("act_fwd"), static_cast<mtk::ActKind>(act), raw(y), f32(x), n,
                 float_kind(y.dtype));
    launched("act_fwd");
}

void CudaDevice::act_bwd_impl(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x,
                              int64_t n) {
    mtk::act_bwd(stream("act_bwd"), static_cast<mtk::ActKind>(act), raw(dx), f32(dy), f32(x), n,
                 float_kind(dx.dtype));
    launched("act_bwd");
}

void CudaDevice::swiglu_fwd_impl(const Tensor& h, const Tensor& gate, const Tensor& up, int64_t n) {
    mtk::swiglu_fwd(stream("swiglu_fwd"), raw(h), f32(gate), f32(up), n, float_kind(h.dtype));
    launched("swiglu_fwd");
}

void CudaDevice::swiglu_bwd_impl(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                                 const Tensor& gate, const Tensor& up, int64_t n) {
    const char* op = "swiglu_bwd";
    mtk::swiglu_bwd(stream(op), f32(dgate), f32(dup), f32(dh), f32(gate), f32(up), n);
    launched(op);
}

void CudaDevice::softmax_impl(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
    mtk::softmax(stream("softmax"), f32(y), f32(x), rows, cols);
    launched("softmax");
}

}  // namespace moetrain::cuda
