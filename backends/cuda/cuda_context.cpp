// Device, stream, allocator, scratch and cuBLAS handle setup/teardown (see cuda_context.h).
#include "cuda/cuda_context.h"

#include <string>

#include "cuda/cuda_errors.h"
#include "moetrain/error.h"

namespace moetrain::cuda {
namespace {
// cuBLAS recommends 32 MiB on Hopper (4 MiB elsewhere); one workspace for the single stream.
constexpr size_t kCublasWorkspace = size_t(32) << 20;
}  // namespace

void* CudaRawAllocator::allocate(size_t bytes) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // not sticky: clear it so the retry starts clean
        return nullptr;
    }
    if (e != cudaSuccess) fail_cuda(e, "cudaMalloc of " + std::to_string(bytes) + " bytes");
    return p;
}

void CudaRawAllocator::release(void* p) {
    cudaFree(p);  // only fails if the context is already gone (process exit): nothing to do
}

CudaContext::CudaContext(int device)
    : device_(device),
      allocator_(std::make_shared<CachingAllocator>(std::make_unique<CudaRawAllocator>(device))) {
    make_current();
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cublas(cublasCreate(&cublas_), "cublasCreate");
    check_cublas(cublasSetStream(cublas_, stream_), "cublasSetStream");
    // Strict fp32 products (no TF32) so the numbers match the other backends.
    check_cublas(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    cublas_workspace_ = allocator_->allocate(kCublasWorkspace);
    check_cublas(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspace),
                 "cublasSetWorkspace");
    lt_ = std::make_unique<LtMatmul>(kCublasWorkspace);
    error_word_ = static_cast<int32_t*>(allocator_->allocate(2 * sizeof(int32_t)));
    check_cuda(cudaMemsetAsync(error_word_, 0, 2 * sizeof(int32_t), stream_),
               "cudaMemsetAsync (error word)");
}

CudaContext::~CudaContext() {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    lt_.reset();
    if (cublas_) cublasDestroy(cublas_);
    allocator_->free(cublas_workspace_);
    allocator_->free(scratch_);
    for (void* p : retired_scratch_) allocator_->free(p);
    allocator_->free(error_word_);
    allocator_->release_cached();
    if (stream_) cudaStreamDestroy(stream_);
}

void* CudaContext::scratch(size_t bytes) {
    if (bytes > scratch_bytes_) {
        MT_CHECK(!capturing_, "op scratch would grow from ", scratch_bytes_, " to ", bytes,
                 " bytes inside a captured CUDA graph");
        if (scratch_in_graph_ && scratch_)
            retired_scratch_.push_back(scratch_);  // a graph may replay this address
        else
            allocator_->free(scratch_);  // stream order: queued users finish before the next user
        scratch_in_graph_ = false;
        scratch_ = nullptr;
        scratch_bytes_ = 0;
        scratch_ = allocator_->allocate(bytes);
        scratch_bytes_ = CachingAllocator::size_class(bytes);
    }
    return scratch_;
}

void CudaContext::make_current() const {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
}

void CudaContext::synchronize() const {
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace moetrain::cuda
