// The CUDA Device: every op of api/moetrain/device.h on one GPU. Each op family's `<op>_impl`s
// live in kernels_cuda/<family>.cu next to the kernels they launch (the family's .cuh, included
// there), so a model call reaches its kernel in two hops: the front door (device.h, which has
// checked the host arguments) calls the `<op>_impl`, which turns tensors into pointers, checks
// only this backend's own limits and launches. Here: construction and the memory ops
// (cuda_device.cpp), gemm with cuBLAS (cuda_gemm.cpp, cublas_calls.cpp). All work is queued on
// the context's single stream; only download() and synchronize() wait. Memory comes from the
// caching allocator, op temporaries from the context's scratch area, so a warmed-up step never
// calls cudaMalloc.
// This header includes no CUDA header: nvcc compiles it into the family .cu files, and the
// cudasim test module (tests/simt) compiles the same files with g++ under the SIMT harness,
// whose CUDA built-ins would clash with the runtime's. The CUDA runtime and cuBLAS are reached
// only through the members below, defined in g++ sources.
//
// Index values (token ids, targets, expert indices) are checked by the kernels, which skip an
// invalid one and report it into the context's error word. cross_entropy checks the word at
// once (except inside a graph capture); every other op's report (moe_sort's and gemm_grouped's
// included, so that an MoE layer queues no host wait) surfaces at the next download() or
// synchronize(), as a moetrain::Error naming the op and the index.
// run_recorded captures a step into a CUDA Graph and replays it (graph_cache.h) unless the
// device was opened with DeviceOptions::cuda_graphs off.
#pragma once

#include <memory>
#include <string>

#include "cuda/caching_allocator.h"
#include "cuda/cudnn_attention.h"
#include "cuda/graph_cache.h"
#include "kernel_interface.h"
#include "moetrain/backend.h"
#include "shared/tensor_pointers.h"

// The backend's name ("cuda"; the test build of these sources with the SIMT harness standing in
// for the GPU, tests/simt, is "cudasim").
#ifndef MOETRAIN_CUDA_BACKEND_NAME
#define MOETRAIN_CUDA_BACKEND_NAME "cuda"
#endif

namespace moetrain::cuda {

class CudaContext;       // cuda_context.h
struct LtShape;          // cublaslt_calls.h
class CudaGraphRuntime;  // cuda_graph_runtime.h

// The kernels' code of a float dtype (FloatKind has DType's values; f32, bf16 and f16 only).
inline mtk::FloatKind float_kind(DType t) {
    static_assert(static_cast<int>(DType::f32) == static_cast<int>(mtk::FloatKind::f32) &&
                  static_cast<int>(DType::bf16) == static_cast<int>(mtk::FloatKind::bf16) &&
                  static_cast<int>(DType::f16) == static_cast<int>(mtk::FloatKind::f16));
    return static_cast<mtk::FloatKind>(static_cast<int>(t));
}

// Opens CUDA device `index` (already checked to exist and be usable).
std::unique_ptr<Device> create_cuda_device(int index, const DeviceOptions& opts);

// One device allocation from the caching allocator (returned to its free list on destruction;
// the allocator outlives the device if buffers do).
class CudaBuffer final : public Buffer {
  public:
    CudaBuffer(Device* dev, size_t bytes, std::shared_ptr<CachingAllocator> alloc)
        : Buffer(dev, bytes), alloc_(std::move(alloc)), ptr_(alloc_->allocate(bytes)) {}
    ~CudaBuffer() override { alloc_->free(ptr_); }
    void* data() const { return ptr_; }

  private:
    std::shared_ptr<CachingAllocator> alloc_;
    void* ptr_;
};

// What `moetrain info` says about the attention kernels of a device of compute capability cc
// (10 * major + minor; attention.cu).
std::string attention_summary(int cc);
// MOETRAIN_CUDA_ATTENTION: "cudnn" (unset: the default; cuDNN's fused attention where it takes
// the shape) or "own" (moetrain's kernels only); any other value throws naming it
// (cuda_attention_cudnn.cpp).
std::string attention_choice();
// MOETRAIN_CUDA_GROUPED_GEMM: "cutlass" (unset: the default) or "cublas"; any other value
// throws naming it (grouped_gemm.cu).
std::string grouped_gemm_choice();
// What `moetrain info` says about gemm_grouped on a device of compute capability cc.
std::string grouped_gemm_summary(int cc);

class CudaDevice final : public Device, public TensorPointers<CudaBuffer> {
  public:
    // cc: compute capability as 10 * major + minor (which kernels may run).
    CudaDevice(int index, std::string name, bool graphs, int cc, int sm_count);
    ~CudaDevice() override;

    std::string backend_name() const override { return MOETRAIN_CUDA_BACKEND_NAME; }
    std::string name() const override { return name_; }
    std::string attention_kernel(const AttnDims& d) const override;  // attention.cu
    std::string gemm_grouped_kernel(const GemmArgs& g,
                                    GroupDim dim) const override;  // grouped_gemm.cu
    std::string gemm_epilogue_kernel(const GemmArgs& g,
                                     const GemmEpilogue& e) const override;  // cuda_gemm.cpp

    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override;  // cuda_device.cpp
    void synchronize() override;

    // ---- recorded steps: CUDA Graphs through the graph cache (cuda_device.cpp) ----
    StepRun run_recorded(const std::string& key, const std::function<void()>& record) override;
    const GraphCache& graph_cache() const { return graphs_; }

    // ---- what the op families use besides raw / f32 / i32 / f32s (TensorPointers) ----
    // A device-side value argument (device.h: i32 [1]): its device pointer, nullptr if empty.
    const int32_t* device_value(const Tensor& t) const { return i32(t); }
    // The stream, with this device made current on the calling thread.
    mtk::Stream stream(const char* op);
    // Throws if the kernels queued by `op` could not be launched.
    void launched(const char* op);
    // Waits for the stream and throws if a kernel reported an invalid index (then clears it).
    // While a graph is being captured it does nothing: the word is checked at the first
    // download after the replay.
    void check_device_error();
    // The device error word kernels report invalid indices into (kernel_interface.h).
    int32_t* error_word();
    // One op's temporaries (CudaContext::scratch): valid until the next scratch() call.
    void* scratch(size_t bytes);
    // Queues a copy of `bytes` host bytes that stay valid (static tables) to device memory.
    void upload_static(void* dst, const void* src, size_t bytes, const char* what);
    // n f32 elements at src rounded to the 16-bit `compute` dtype into dst (on the stream):
    // the operand copies of the 16-bit products (kernels_cuda/convert.cu).
    void round_operand(void* dst, DType compute, const void* src, int64_t n);
    // n 16-bit elements (dtype from) at src widened to f32 into dst (on the stream): the outputs
    // of the cuDNN attention path (kernels_cuda/convert.cu).
    void widen_operand(float* dst, DType from, const void* src, int64_t n);
    // Whether gemm / gemm_epilogue run (g, e) as the skinny product of kernels_cuda/gemv.cuh
    // (mtk::gemv_shape: the decode step's few rows against a weight; bias and GELU epilogues),
    // and that product (kernels_cuda/gemv.cu).
    static bool gemv_takes(const GemmArgs& g, const GemmEpilogue& e);
    void gemv(const GemmArgs& g, const GemmEpilogue& e);
    // cuBLAS products on the stream (cuda_gemm.cpp; cublas_calls.h has the contracts).
    void cublas_strided(const GemmArgs& g, const void* a, const void* b, float* c);
    void cublas_batched(const GemmArgs& g, const void* const* a_ptrs, const void* const* b_ptrs,
                        float* const* c_ptrs, int64_t batch);

  protected:
    // Every op of api/moetrain/device_ops.def: the memory ops in cuda_device.cpp, gemm in
    // cuda_gemm.cpp, the others in kernels_cuda/<family>.cu.
#define MT_DEVICE_OP(name, params, args, ...) void name##_impl params override;
#include "moetrain/device_ops.def"

  private:
    // The operands of a product as cuBLAS reads them: f32 ones converted into the scratch
    // when g.compute is 16-bit (cuda_gemm.cpp), and `extra_bytes` more of the same scratch
    // (256-byte aligned) for the caller.
    struct GemmOperands {
        const void* a;
        const void* b;
        void* extra = nullptr;
    };
    GemmOperands gemm_operands(const GemmArgs& g, size_t extra_bytes = 0);
    // y[i] += x[i] for n f32 elements on the stream (elementwise.cu): the bias gradient cuBLASLt
    // writes into the scratch, added to the op's dbias.
    void add_f32(float* y, const float* x, int64_t n);
    // Whether gemm_grouped runs (g, dim) on the CUTLASS kernels (grouped_gemm.cu): not declined
    // (MOETRAIN_CUDA_GROUPED_GEMM=cublas, read when the device opens), built, compute
    // capability 9.0, 16-bit products, a layout with a kernel and 16-byte aligned operands.
    bool grouped_runs_cutlass(const GemmArgs& g, GroupDim dim) const;
    // Whether attention_fwd / attention_bwd of d run on cuDNN (cuda_attention_cudnn.cpp): not
    // declined (MOETRAIN_CUDA_ATTENTION=own), the shape mtk::attn_cudnn_shape allows, cuDNN
    // loaded (on first use) and building both graphs of the shape. Otherwise attention_kernel's
    // own kernels run.
    bool attention_runs_cudnn(const AttnDims& d) const;
    // The cuDNN path's halves (cuda_attention_cudnn.cpp): f32 tensors rounded to the attention
    // precision into the op scratch, cuDNN's graph, the 16-bit results widened into the outputs.
    void attention_cudnn_fwd(const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const AttnDims& d, float scale);
    void attention_cudnn_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& o, const Tensor& lse, const AttnDims& d, float scale);
    // gemm_epilogue's cuBLASLt shape (cuda_gemm.cpp; LtMatmul::supported says whether it runs).
    LtShape lt_shape(const GemmArgs& g, const GemmEpilogue& e) const;
    // Whether gemm_epilogue runs (g, e) as one cuBLASLt product (else the unfused ops).
    bool lt_fuses(const GemmArgs& g, const GemmEpilogue& e) const;

    // Throws naming `what` if a graph is being captured (host transfers cannot be captured).
    void not_capturing(const char* what) const;

    std::unique_ptr<CudaContext> ctx_;
    std::string name_;
    int cc_;
    int sm_count_;
    bool grouped_cutlass_;  // MOETRAIN_CUDA_GROUPED_GEMM is not cublas
    bool attention_cudnn_;  // MOETRAIN_CUDA_ATTENTION is not own
    // cuDNN, opened when a shape first asks for it (null if unavailable: said on stderr then).
    mutable std::unique_ptr<CudnnAttention> cudnn_;
    mutable bool cudnn_opened_ = false;
    std::unique_ptr<CudaGraphRuntime> graph_runtime_;
    GraphCache graphs_;
};

}  // namespace moetrain::cuda
