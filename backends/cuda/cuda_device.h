// The CUDA Device: every op of api/moetrain/device.h on one GPU, with the kernels of
// kernels_cuda/ (through the launchers declared in kernels_cuda/ops.h) and cuBLAS for every
// matrix product (cublas_calls.cpp). All work is queued on the context's single stream; only
// download() and synchronize() wait. Memory comes from the caching allocator, op temporaries
// from the context's scratch area, so a warmed-up step never calls cudaMalloc.
// The ops are split by family over cuda_ops_*.cpp; the front door (api/moetrain/device.h)
// has checked their host arguments, the op files check only this backend's own limits.
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
#include "cuda/cuda_context.h"
#include "cuda/cuda_graph_runtime.h"
#include "cuda/graph_cache.h"
#include "moetrain/backend.h"
#include "ops.h"
#include "shared/tensor_pointers.h"

// The backend's name ("cuda"; the test build of these sources with the SIMT harness standing in
// for the GPU, tests/simt, is "cudasim").
#ifndef MOETRAIN_CUDA_BACKEND_NAME
#define MOETRAIN_CUDA_BACKEND_NAME "cuda"
#endif

namespace moetrain::cuda {

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

class CudaDevice final : public Device, public TensorPointers<CudaBuffer> {
  public:
    CudaDevice(int index, std::string name, bool graphs);

    std::string backend_name() const override { return MOETRAIN_CUDA_BACKEND_NAME; }
    std::string name() const override { return name_; }

    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override;  // cuda_device.cpp
    void synchronize() override;

    // ---- recorded steps: CUDA Graphs through the graph cache (cuda_device.cpp) ----
    StepRun run_recorded(const std::string& key, const std::function<void()>& record) override;
    const GraphCache& graph_cache() const { return graphs_; }

    // ---- shared by the op files: raw / f32 / i32 / f32s (TensorPointers) ----
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
    int32_t* error_word() { return ctx_.error_word(); }
    CudaContext& context() { return ctx_; }

  protected:
    // Every op of api/moetrain/device_ops.def: memory ops in cuda_device.cpp, the others by
    // family in cuda_ops_dense.cpp, cuda_ops_grouped.cpp and cuda_ops_train.cpp.
#define MT_DEVICE_OP(name, params, args) void name##_impl params override;
#include "moetrain/device_ops.def"

  private:
    // Throws naming `what` if a graph is being captured (host transfers cannot be captured).
    void not_capturing(const char* what) const;

    CudaContext ctx_;
    std::string name_;
    CudaGraphRuntime graph_runtime_{ctx_};
    GraphCache graphs_;
};

}  // namespace moetrain::cuda
