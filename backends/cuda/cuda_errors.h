// Error mapping for the CUDA backend: every failed CUDA runtime or cuBLAS call becomes one
// moetrain::Error line "<what>: <library message> (<status name>)", e.g.
// "cudaMalloc of 64 MiB: out of memory (cudaErrorMemoryAllocation)". The formatting is plain
// C++ (unit-tested without a GPU); the check_* helpers query the libraries for names and texts.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <string>

namespace moetrain::cuda {

// "<what>: <text> (<name>)"; an empty `what` gives "<text> (<name>)".
std::string format_status(const std::string& what, const char* text, const char* name);

// The runtime's description of a CUDA error: "<cudaGetErrorString> (<cudaGetErrorName>)".
std::string describe(cudaError_t e);
// The cuBLAS description of a status: "<cublasGetStatusString> (<cublasGetStatusName>)".
std::string describe(cublasStatus_t s);

[[noreturn]] void fail_cuda(cudaError_t e, const std::string& what);
[[noreturn]] void fail_cublas(cublasStatus_t s, const std::string& what);

inline void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) fail_cuda(e, what);
}
inline void check_cublas(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) fail_cublas(s, what);
}

// After a kernel launch: a launch-configuration error (or an earlier asynchronous error the
// runtime reports now) is thrown naming the op that launched it.
void check_launch(const char* op);

}  // namespace moetrain::cuda
