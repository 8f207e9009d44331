// CudaDevice ops: causal attention forward and backward. Each turns its tensors into pointers and
// calls a launcher on the device stream (docs/CUDA.md): cuDNN's fused attention where it takes
// the shape (CudaDevice::attention_runs_cudnn, backends/cuda/cuda_attention_cudnn.cpp); else the
// split-K decode kernels of
// attention_decode.cuh for the forward of a decode step (one query over a longer KV cache,
// mtk::attn_decode); else the tensor-core kernels of attention_wmma.cuh when the attention
// precision is bf16 / f16, head_dim 64 or 128 and the device has bf16 fragments
// (mtk::attn_kernel, launch.h); else the register-tiled fp32 kernels of attention_tiled.cuh for
// head_dim 32 and 64 (and 96, 128 from compute capability 8.0); else the scalar fp32 kernels of
// attention.cuh.
#include <cstdlib>
#include <string>

#include "attention.cuh"
#include "attention_decode.cuh"
#include "attention_tiled.cuh"
#include "attention_wmma.cuh"

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
mtk::AttnKernel kernel_for(const AttnDims& d, int cc) {
    return mtk::attn_kernel(d.compute != DType::f32, d.hd, cc);
}
}  // namespace

std::string attention_summary(int cc) {
    const std::string fp32 =
        std::string("register-tiled fp32 (head_dim ") +
        (mtk::attn_tiled_head_dim(128, cc) ? "32/64/96/128" : "32/64") +
        "), scalar fp32 otherwise, split-K fp32 decode for one query over a KV cache";
    if (cc >= mtk::kAttnWmmaMinCc) {
        const char* choice = std::getenv("MOETRAIN_CUDA_ATTENTION");
        const std::string cudnn =
            choice && std::string(choice) == "own"
                ? std::string("cuDNN declined (MOETRAIN_CUDA_ATTENTION=own)")
                : "cuDNN fused attention for bf16/fp16 attention precision training shapes (" +
                      cudnn_attention_probe() + ")";
        return "attention: " + cudnn +
               ", wmma flash (bf16/fp16 attention precision, head_dim 64/128), " + fp32;
    }
    return std::string("attention: ") + fp32 +
           " (the wmma flash kernels need compute capability 8.0)";
}

namespace {
const char* kernel_name(mtk::AttnKernel k) {
    switch (k) {
        case mtk::AttnKernel::wmma:
            return "wmma";
        case mtk::AttnKernel::tiled:
            return "tiled";
        default:
            return "scalar";
    }
}
}  // namespace

// "decode" names the forward's kernels for a decode shape; a backward of that shape (the model
// never runs one: decoding is inference) runs the wmma, tiled or scalar kernels by attn_kernel.
std::string CudaDevice::attention_kernel(const AttnDims& d) const {
    if (mtk::attn_decode(d.Tq, d.S)) return "decode";
    if (attention_runs_cudnn(d)) return "cudnn";
    return kernel_name(kernel_for(d, cc_));
}

void CudaDevice::attention_fwd_impl(const Tensor& o, const Tensor& lse, const Tensor& q,
                                    const Tensor& k, const Tensor& v, const AttnDims& d,
                                    float scale) {
    const char* op = "attention_fwd";
    mtk::AttnShape s = checked_shape(d, op);
    if (attention_runs_cudnn(d)) return attention_cudnn_fwd(o, lse, q, k, v, d, scale);
    s.tk_dev = device_value(d.tk_dev);
    s.err = error_word();
    const mtk::AttnKernel kernel = kernel_for(d, cc_);
    if (mtk::attn_decode(d.Tq, d.S)) {
        const mtk::AttnDecodePlan p = mtk::attn_decode_plan(d.B, d.S, d.H, d.K, d.hd);
        mtk::attention_decode_fwd(stream(op), f32(o), f32(lse), f32(q), f32(k), f32(v), s, scale,
                                  static_cast<float*>(scratch(p.scratch)));
    } else if (kernel == mtk::AttnKernel::wmma) {
        mtk::attention_wmma_fwd(stream(op), d.compute == DType::bf16, f32(o), f32(lse), f32(q),
                                f32(k), f32(v), s, scale);
    } else if (kernel == mtk::AttnKernel::tiled) {
        mtk::attention_tiled_fwd(stream(op), f32(o), f32(lse), f32(q), f32(k), f32(v), s, scale);
    } else {
        mtk::attention_fwd(stream(op), f32(o), f32(lse), f32(q), f32(k), f32(v), s, scale);
    }
    launched(op);
}

void CudaDevice::attention_bwd_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                    const Tensor& dout, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor& o, const Tensor& lse,
                                    const AttnDims& d, float scale) {
    const char* op = "attention_bwd";
    mtk::AttnShape s = checked_shape(d, op);
    if (attention_runs_cudnn(d))
        return attention_cudnn_bwd(dq, dk, dv, dout, q, k, v, o, lse, d, scale);
    s.tk_dev = device_value(d.tk_dev);
    s.err = error_word();
    const auto [pdq, pdk, pdv, pdo, pq, pk, pv, po, pl] = f32s(dq, dk, dv, dout, q, k, v, o, lse);
    const mtk::AttnKernel kernel = kernel_for(d, cc_);
    // D (its own 256-byte span), then for the tiled and WMMA kernels the partial dk / dv sums of
    // a GQA / MQA head split (none for MHA).
    const size_t d_bytes = mtk::ceil_div(mtk::attn_bwd_scratch_bytes(d.B, d.H, d.Tq), 256) * 256;
    const size_t part_bytes =
        kernel == mtk::AttnKernel::scalar ? 0 : mtk::attn_kv_part_bytes(d.B, d.S, d.H, d.K, d.hd);
    auto* buf = static_cast<unsigned char*>(scratch(d_bytes + part_bytes));
    auto* tmp = reinterpret_cast<float*>(buf);
    if (kernel == mtk::AttnKernel::wmma) {
        mtk::attention_bwd_dot(stream(op), tmp, pdo, po, s);
        mtk::attention_wmma_bwd(stream(op), d.compute == DType::bf16, pdq, pdk, pdv, pdo, pq, pk,
                                pv, pl, tmp, s, scale, reinterpret_cast<float*>(buf + d_bytes));
    } else if (kernel == mtk::AttnKernel::tiled) {
        mtk::attention_bwd_dot(stream(op), tmp, pdo, po, s);
        mtk::attention_tiled_bwd(stream(op), pdq, pdk, pdv, pdo, pq, pk, pv, pl, tmp, s, scale,
                                 reinterpret_cast<float*>(buf + d_bytes));
    } else {
        mtk::attention_bwd(stream(op), pdq, pdk, pdv, pdo, pq, pk, pv, po, pl, s, scale, tmp);
    }
    launched(op);
}

}  // namespace moetrain::cuda
