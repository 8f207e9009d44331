// The per-device CUDA state every op uses: the device ordinal, the one stream all work is queued
// on, the caching allocator (cudaMalloc only on a cache miss), a reusable scratch workspace for
// kernels that need temporaries, the cuBLAS and cuBLASLt handles with their workspace, and the
// device error word kernels report invalid indices into. Created when a cuda Device is opened.
// Every cuBLAS call of the backend is in cublas_calls.cpp.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/caching_allocator.h"
#include "cuda/cublaslt_calls.h"

namespace moetrain::cuda {

// cudaMalloc / cudaFree on one device (nullptr on cudaErrorMemoryAllocation).
class CudaRawAllocator final : public RawAllocator {
  public:
    explicit CudaRawAllocator(int device) : device_(device) {}
    void* allocate(size_t bytes) override;
    void release(void* p) override;

  private:
    int device_;
};

class CudaContext {
  public:
    explicit CudaContext(int device);
    ~CudaContext();
    CudaContext(const CudaContext&) = delete;
    CudaContext& operator=(const CudaContext&) = delete;

    int device() const { return device_; }
    cudaStream_t stream() const { return stream_; }
    cublasHandle_t cublas() const { return cublas_; }
    // cuBLASLt (the products with an epilogue) and the workspace it shares with cuBLAS: both
    // queue on the one stream, so their work never overlaps.
    LtMatmul& lt() { return *lt_; }
    void* cublas_workspace() const { return cublas_workspace_; }
    CachingAllocator& allocator() { return *allocator_; }
    const std::shared_ptr<CachingAllocator>& allocator_ptr() const { return allocator_; }

    // Scratch memory for one op's temporaries, valid until the next scratch() call. Grows
    // (through the caching allocator) only when a larger request arrives, i.e. during warm-up;
    // growing while a graph is being captured is an error. A scratch area a captured graph
    // may use is never freed while the context lives (graphs replay its address): growing
    // past it retires it instead.
    void* scratch(size_t bytes);

    // True while the stream is capturing a graph (set by the graph runtime): nothing may
    // allocate, upload, download or synchronize, and error-word checks wait for the next
    // download after the replay.
    bool capturing() const { return capturing_; }
    void set_capturing(bool on) {
        capturing_ = on;
        if (on) scratch_in_graph_ = true;
    }

    // The two-word device error word (code, value) kernels report invalid indices into
    // (kernels_cuda/kernel_interface.h ErrorCode); zero while nothing was reported.
    int32_t* error_word() const { return error_word_; }

    // Makes this context's device current on the calling thread.
    void make_current() const;
    void synchronize() const;

  private:
    int device_;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    std::shared_ptr<CachingAllocator> allocator_;
    void* cublas_workspace_ = nullptr;
    std::unique_ptr<LtMatmul> lt_;
    int32_t* error_word_ = nullptr;
    void* scratch_ = nullptr;
    size_t scratch_bytes_ = 0;
    bool capturing_ = false;
    bool scratch_in_graph_ = false;       // a capture began while scratch_ was current
    std::vector<void*> retired_scratch_;  // earlier scratch areas graphs may still use
};

}  // namespace moetrain::cuda
