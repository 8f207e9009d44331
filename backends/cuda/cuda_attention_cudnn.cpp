// CudaDevice: attention_fwd / attention_bwd through cuDNN's fused attention (cudnn_attention.h)
// for the shapes it takes (docs/CUDA.md, "cuDNN attention"). moetrain's attention tensors are
// f32; cuDNN's are 16-bit. So each call rounds q, k, v (and o, dout) to the attention precision
// into the op scratch, as the tensor-core kernels round them in shared memory, runs cuDNN's
// graph into 16-bit outputs there, and widens those into the f32 outputs; lse is cuDNN's
// statistics tensor, written and read in place. The results differ from the WMMA kernels' only
// by the outputs' and gradients' rounding to the 16-bit type (docs/MEMORY_AND_PRECISION.md).
#include <cstdio>
#include <string>

#include "cuda/cuda_context.h"
#include "cuda/cuda_device.h"
#include "cuda/env_choice.h"
#include "launch.h"

namespace moetrain::cuda {

namespace {

CudnnAttnShape cudnn_shape(const AttnDims& d) {
    return {d.B, d.Tq, d.H, d.K, d.hd, d.compute};
}

size_t span(int64_t elems) {  // 16-bit elements, in 256-byte aligned spans
    return (static_cast<size_t>(elems) * 2 + 255) / 256 * 256;
}

// Consecutive 256-byte aligned parts of one op scratch block.
class Carve {
  public:
    explicit Carve(void* block) : next_(static_cast<unsigned char*>(block)) {}
    void* take(size_t bytes) {
        void* p = next_;
        next_ += bytes;
        return p;
    }
    void* take16(int64_t elems) { return take(span(elems)); }  // 16-bit elements

  private:
    unsigned char* next_;
};

}  // namespace

std::string attention_choice() {
    return env_choice("MOETRAIN_CUDA_ATTENTION", "cudnn", "cudnn", "own");
}

bool CudaDevice::attention_runs_cudnn(const AttnDims& d) const {
    if (!attention_cudnn_ || !cudnn_attention_built()) return false;
    if (!mtk::attn_cudnn_shape(d.compute != DType::f32, d.Tq, d.Tk, d.S, d.hd,
                               device_value(d.tk_dev) != nullptr, cc_))
        return false;
    if (!cudnn_opened_) {
        cudnn_opened_ = true;
        ctx_->make_current();
        std::string why;
        cudnn_ = open_cudnn_attention(&why);
        if (!cudnn_)  // once per device: the fallback is never silent
            std::fprintf(stderr,
                         "moetrain: %s: no cuDNN attention (%s); moetrain's own kernels "
                         "run it\n",
                         name_.c_str(), why.c_str());
    }
    if (!cudnn_) return false;
    const CudnnAttnShape s = cudnn_shape(d);
    return cudnn_->supports(s, false, nullptr) && cudnn_->supports(s, true, nullptr);
}

void CudaDevice::attention_cudnn_fwd(const Tensor& o, const Tensor& lse, const Tensor& q,
                                     const Tensor& k, const Tensor& v, const AttnDims& d,
                                     float scale) {
    const char* op = "attention_fwd";
    const CudnnAttnShape s = cudnn_shape(d);
    const int64_t nq = d.B * d.Tq * d.H * d.hd, nkv = d.B * d.Tq * d.K * d.hd;
    const size_t ws = cudnn_->workspace(s, false);
    Carve buf(scratch(2 * span(nq) + 2 * span(nkv) + ws));
    void *q16 = buf.take16(nq), *k16 = buf.take16(nkv), *v16 = buf.take16(nkv),
         *o16 = buf.take16(nq);
    round_operand(q16, d.compute, raw(q), nq);
    round_operand(k16, d.compute, raw(k), nkv);
    round_operand(v16, d.compute, raw(v), nkv);
    cudnn_->forward(s, {.q = q16,
                        .k = k16,
                        .v = v16,
                        .o = o16,
                        .lse = f32(lse),
                        .scale = scale,
                        .workspace = ws ? buf.take(ws) : nullptr,
                        .stream = stream(op)});
    widen_operand(f32(o), d.compute, o16, nq);
    launched(op);
}

void CudaDevice::attention_cudnn_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                     const Tensor& dout, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& o, const Tensor& lse,
                                     const AttnDims& d, float scale) {
    const char* op = "attention_bwd";
    const CudnnAttnShape s = cudnn_shape(d);
    const int64_t nq = d.B * d.Tq * d.H * d.hd, nkv = d.B * d.Tq * d.K * d.hd;
    const size_t ws = cudnn_->workspace(s, true);
    // q, o, dout, dq: nq each; k, v, dk, dv: nkv each; then the workspace.
    Carve buf(scratch(4 * span(nq) + 4 * span(nkv) + ws));
    void *q16 = buf.take16(nq), *o16 = buf.take16(nq), *do16 = buf.take16(nq),
         *dq16 = buf.take16(nq);
    void *k16 = buf.take16(nkv), *v16 = buf.take16(nkv), *dk16 = buf.take16(nkv),
         *dv16 = buf.take16(nkv);
    round_operand(q16, d.compute, raw(q), nq);
    round_operand(o16, d.compute, raw(o), nq);
    round_operand(do16, d.compute, raw(dout), nq);
    round_operand(k16, d.compute, raw(k), nkv);
    round_operand(v16, d.compute, raw(v), nkv);
    cudnn_->backward(s, {.q = q16,
                         .k = k16,
                         .v = v16,
                         .o = o16,
                         .dout = do16,
                         .lse = f32(lse),
                         .dq = dq16,
                         .dk = dk16,
                         .dv = dv16,
                         .scale = scale,
                         .workspace = ws ? buf.take(ws) : nullptr,
                         .stream = stream(op)});
    widen_operand(f32(dq), d.compute, dq16, nq);
    widen_operand(f32(dk), d.compute, dk16, nkv);
    widen_operand(f32(dv), d.compute, dv16, nkv);
    launched(op);
}

}  // namespace moetrain::cuda
