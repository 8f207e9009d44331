// Causal attention through cuDNN's fused flash-attention graphs (cudnn-frontend's SDPA forward
// and backward), the fast path of attention_fwd / attention_bwd for 16-bit attention precision
// on the shapes of training (docs/CUDA.md, "cuDNN attention"). cuDNN is loaded at run time
// (cudnn-frontend's dynamic loading: dlopen of libcudnn.so.9), so the CUDA backend loads and
// runs its own kernels where cuDNN is absent; `moetrain info` says which. Compiled by
// cudnn_attention.cpp when the build finds cudnn-frontend's headers and cudnn.h (tools/
// install-deps.sh installs the former from PyPI); otherwise cudnn_attention_none.cpp.
//
// Layouts are moetrain's (AttnDims, device.h): q / o / dq / do [B,T,H,hd], k / v / dk / dv
// [B,T,K,hd] in the 16-bit dtype, lse [B,H,T] f32 (natural-log logsumexp of the scaled scores,
// which is cuDNN's softmax statistics tensor). Only Tq == Tk == S: the training shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "moetrain/device.h"

struct CUstream_st;  // cudaStream_t, without the CUDA headers (the SIMT harness has its own)

namespace moetrain::cuda {

// One attention shape as the graphs are keyed.
struct CudnnAttnShape {
    int64_t B = 0, T = 0, H = 0, K = 0, hd = 0;
    DType dtype = DType::bf16;  // bf16 or f16 operands, outputs and gradients
    bool operator==(const CudnnAttnShape&) const = default;
};

struct CudnnAttnFwd {
    const void *q = nullptr, *k = nullptr, *v = nullptr;
    void* o = nullptr;
    float* lse = nullptr;
    float scale = 1.0f;  // passed by value: not part of the graph
    void* workspace = nullptr;
    CUstream_st* stream = nullptr;
};
struct CudnnAttnBwd {
    const void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *dout = nullptr;
    const float* lse = nullptr;
    void *dq = nullptr, *dk = nullptr, *dv = nullptr;
    float scale = 1.0f;
    void* workspace = nullptr;
    CUstream_st* stream = nullptr;
};

// The library and its built graphs, one per device (the handle is bound to the device current
// when it was opened). Not thread-safe, as the device is not.
class CudnnAttention {
  public:
    virtual ~CudnnAttention() = default;
    // Whether cuDNN takes the shape: builds (once) and caches the forward or backward graph;
    // false, with the reason in *why (may be null), when cuDNN refuses it.
    virtual bool supports(const CudnnAttnShape& s, bool backward, std::string* why) = 0;
    // Workspace bytes of a supported shape's graph.
    virtual size_t workspace(const CudnnAttnShape& s, bool backward) = 0;
    // Queue one call of a supported shape on the stream (throws naming cuDNN's error).
    virtual void forward(const CudnnAttnShape& s, const CudnnAttnFwd& a) = 0;
    virtual void backward(const CudnnAttnShape& s, const CudnnAttnBwd& a) = 0;
};

// Whether this build has the cuDNN path at all.
bool cudnn_attention_built();
// What `moetrain info` says of it without opening a handle: "cuDNN 9.19.0", or why not ("this
// build has no cuDNN attention", "libcudnn.so.9 not found: ...").
std::string cudnn_attention_probe();
// Opens cuDNN on the current device: null, with the reason in *why, when the build has no cuDNN
// path, libcudnn.so.9 cannot be loaded or a handle cannot be made.
std::unique_ptr<CudnnAttention> open_cudnn_attention(std::string* why);

}  // namespace moetrain::cuda
