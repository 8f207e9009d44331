// CudaDevice ops: causal attention forward and backward. Each turns its tensors into pointers and
// calls the launcher of attention.cuh on the device stream (docs/CUDA.md).
#include "attention.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

namespace {
mtk::AttnShape checked_shape(const AttnDims& d, const char* op) {
    MT_CHECK(d.hd > 0 && d.hd <= mtk::kMaxHeadDim, op, ": head_dim ", d.hd, " outside 1..",
             mtk::kMaxHeadDim, " (the CUDA attention kernels' limit)");
    MT_CHECK(d.H <= 65535 && d.B <= 65535, op, ": batch ", d.B, " / heads ", d.H,
             " exceed the CUDA grid limit 65535");
    return {d.B, d.Tq, d.Tk, d.S, d.H, d.K, d.hd, nullptr, nullptr};
}
}  // namespace

void CudaDevice::attention_fwd_impl(const Tensor& o, const Tensor& lse, const Tensor& q,
                                    const Tensor& k, const Tensor& v, const AttnDims& d,
                                    float scale) {
    const char* op = "attention_fwd";
    mtk::AttnShape s = checked_shape(d, op);
    s.tk_dev = device_value(d.tk_dev);
    s.err = error_word();
    mtk::attention_fwd(stream(op), f32(o), f32(lse), f32(q), f32(k), f32(v), s, scale);
    launched(op);
}

void CudaDevice::attention_bwd_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                    const Tensor& dout, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor& o, const Tensor& lse,
                                    const AttnDims& d, float scale) {
    const char* op = "attention_bwd";
    mtk::AttnShape s = checked_shape(d, op);
    s.tk_dev = device_value(d.tk_dev);
    s.err = error_word();
    const auto [pdq, pdk, pdv, pdo, pq, pk, pv, po, pl] = f32s(dq, dk, dv, dout, q, k, v, o, lse);
    auto* tmp = static_cast<float*>(scratch(mtk::attn_bwd_scratch_bytes(d.B, d.H, d.Tq)));
    mtk::attention_bwd(stream(op), pdq, pdk, pdv, pdo, pq, pk, pv, po, pl, s, scale, tmp);
    launched(op);
}

}  // namespace moetrain::cuda
