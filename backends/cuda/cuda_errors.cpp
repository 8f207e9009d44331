// CUDA runtime / cuBLAS status -> moetrain::Error (see cuda_errors.h).
#include "cuda/cuda_errors.h"

#include "moetrain/error.h"

namespace moetrain::cuda {

std::string format_status(const std::string& what, const char* text, const char* name) {
    std::string s = what.empty() ? "" : what + ": ";
    s += text && *text ? text : "unknown error";
    s += " (";
    s += name && *name ? name : "unknown status";
    s += ")";
    return s;
}

std::string describe(cudaError_t e) {
    return format_status("", cudaGetErrorString(e), cudaGetErrorName(e));
}

std::string describe(cublasStatus_t s) {
    return format_status("", cublasGetStatusString(s), cublasGetStatusName(s));
}

void fail_cuda(cudaError_t e, const std::string& what) {
    throw Error(format_status("CUDA " + what, cudaGetErrorString(e), cudaGetErrorName(e)));
}

void fail_cublas(cublasStatus_t s, const std::string& what) {
    throw Error(format_status("cuBLAS " + what, cublasGetStatusString(s), cublasGetStatusName(s)));
}

void check_launch(const char* op) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail_cuda(e, std::string("kernel launch for ") + op);
}

}  // namespace moetrain::cuda
