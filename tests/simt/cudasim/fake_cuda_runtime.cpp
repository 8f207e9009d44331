// A stand-in for the few CUDA runtime and cuBLAS entry points backends/cuda uses, on host
// memory, for the `cudasim` test module: the real CUDA backend sources (Device, context,
// allocator, argument checks, launchers) built with the kernels running under the SIMT harness,
// so the whole op test suite can drive the CUDA Device on a machine without a GPU.
// Declarations come from the real CUDA headers; only the definitions are ours. The GEMMs are
// cuBLAS's column-major strided-batched and pointer-array batched contracts written as plain
// loops (double accumulation), for f32, bf16 and f16 A / B (both the same type) with an f32 C.
// Stream work (kernel grids, copies, fills, GEMMs) goes through simt::submit, so a fake CUDA
// Graph capture records it (arguments copied, pointers read when replayed) instead of running
// it, and a graph launch runs the recorded list; a synchronisation or allocation during a
// capture invalidates it, as the thread-local capture mode of the real runtime does.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "moetrain/dtype.h"

namespace simt {  // tests/simt/simt.h (not included here: its CUDA keywords clash with
                  // cuda_runtime_api.h)
void submit(std::function<void()> work);
void set_capture_list(std::vector<std::function<void()>>* list);
std::vector<std::function<void()>>* capture_list();
}  // namespace simt

namespace {
char g_stream_token, g_cublas_token;
using Graph = std::vector<std::function<void()>>;
bool g_capture_invalidated = false;

// An API call the capture mode forbids: invalidates the capture in progress.
cudaError_t forbidden_while_capturing() {
    if (!simt::capture_list()) return cudaSuccess;
    g_capture_invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
}

// Element i of a cuBLAS operand of type t as a double.
double load(const void* p, cudaDataType t, long long i) {
    if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    return t == CUDA_R_16BF ? moetrain::bf16_to_f32(h) : moetrain::f16_to_f32(h);
}
size_t elem_bytes(cudaDataType t) {
    return t == CUDA_R_32F ? 4 : 2;
}

bool supported(cudaDataType a, cudaDataType b, cudaDataType c, cublasComputeType_t compute) {
    const bool known = a == CUDA_R_32F || a == CUDA_R_16BF || a == CUDA_R_16F;
    return known && b == a && c == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F;
}

// One column-major product C = al op(A) op(B) + be C (A and B of type t, C f32), double
// accumulation; be = 0 does not read C.
void gemm_one(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, float al,
              const void* a, cudaDataType t, int lda, const void* b, int ldb, float be, float* c,
              int ldc) {
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            double acc = 0;
            for (int p = 0; p < k; ++p) {
                double av = load(a, t,
                                 transa == CUBLAS_OP_N ? i + static_cast<long long>(p) * lda
                                                       : p + static_cast<long long>(i) * lda);
                double bv = load(b, t,
                                 transb == CUBLAS_OP_N ? p + static_cast<long long>(j) * ldb
                                                       : j + static_cast<long long>(p) * ldb);
                acc += av * bv;
            }
            float& cv = c[i + static_cast<long long>(j) * ldc];
            cv = be == 0.0f ? static_cast<float>(al * acc) : static_cast<float>(al * acc + be * cv);
        }
}

// The errors the simulation raises: name and message as the real runtime gives them.
struct SimulatedError {
    cudaError_t code;
    const char *name, *text;
};
constexpr SimulatedError kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
};

const SimulatedError* simulated_error(cudaError_t e) {
    for (const SimulatedError& s : kErrors)
        if (s.code == e) return &s;
    return nullptr;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    std::memset(prop, 0, sizeof *prop);
    std::strncpy(prop->name, "SIMT harness (kernels on CPU fibers)", sizeof prop->name - 1);
    prop->totalGlobalMem = size_t(16) << 30;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    prop->sharedMemPerBlockOptin = 48 * 1024;
    return cudaSuccess;
}

// Every attribute reads 0: the simulated device has no memory clock or bus width to report, so
// the backend reports no bandwidth (cuda_backend.cpp reported_bandwidth_gbs).
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr, int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    *value = 0;
    return cudaSuccess;
}

const char* cudaGetErrorString(cudaError_t e) {
    const SimulatedError* s = simulated_error(e);
    return s ? s->text : "simulated CUDA error";
}

const char* cudaGetErrorName(cudaError_t e) {
    const SimulatedError* s = simulated_error(e);
    return s ? s->name : "cudaErrorUnknown";
}

cudaError_t cudaGetLastError(void) {
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
    if (cudaError_t e = forbidden_while_capturing()) return e;
    *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
    *s = reinterpret_cast<cudaStream_t>(&g_stream_token);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
    return forbidden_while_capturing();
}
cudaError_t cudaStreamDestroy(cudaStream_t) {
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
    simt::submit([=] { std::memset(p, value, bytes); });
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
    if (kind != cudaMemcpyDeviceToDevice)
        if (cudaError_t e = forbidden_while_capturing()) return e;  // pageable host memory
    simt::submit([=] { std::memmove(dst, src, bytes); });
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
    if (simt::capture_list()) return cudaErrorIllegalState;
    g_capture_invalidated = false;
    simt::set_capture_list(new Graph);
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
    Graph* g = simt::capture_list();
    if (!g) return cudaErrorIllegalState;
    simt::set_capture_list(nullptr);
    if (g_capture_invalidated) {
        delete g;
        *graph = nullptr;
        return cudaErrorStreamCaptureInvalidated;
    }
    *graph = reinterpret_cast<cudaGraph_t>(g);
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
    *exec = reinterpret_cast<cudaGraphExec_t>(new Graph(*reinterpret_cast<Graph*>(graph)));
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete reinterpret_cast<Graph*>(graph);
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
    for (const auto& work : *reinterpret_cast<Graph*>(exec)) simt::submit(work);
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete reinterpret_cast<Graph*>(exec);
    return cudaSuccess;
}

cublasStatus_t cublasCreate(cublasHandle_t* h) {
    *h = reinterpret_cast<cublasHandle_t>(&g_cublas_token);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t) {
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) {
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) {
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void*, size_t) {
    return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusString(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? "success" : "simulated cuBLAS error";
}
const char* cublasGetStatusName(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType Atype, int lda, long long strideA, const void* B,
    cudaDataType Btype, int ldb, long long strideB, const void* beta, void* C, cudaDataType Ctype,
    int ldc, long long strideC, int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
    if (!supported(Atype, Btype, Ctype, compute)) return CUBLAS_STATUS_NOT_SUPPORTED;
    const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
    simt::submit([=] {
        for (int bt = 0; bt < batch; ++bt)
            gemm_one(transa, transb, m, n, k, al,
                     static_cast<const char*>(A) + bt * strideA * elem_bytes(Atype), Atype, lda,
                     static_cast<const char*>(B) + bt * strideB * elem_bytes(Btype), ldb, be,
                     static_cast<float*>(C) + bt * strideC, ldc);
    });
    return CUBLAS_STATUS_SUCCESS;
}

// The pointer arrays ("device" memory is host memory here) are read when the work runs, so a
// replayed graph uses the pointers its planning kernels wrote in that replay.
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t, cublasOperation_t transa,
                                   cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                   const void* const Aarray[], cudaDataType Atype, int lda,
                                   const void* const Barray[], cudaDataType Btype, int ldb,
                                   const void* beta, void* const Carray[], cudaDataType Ctype,
                                   int ldc, int batch, cublasComputeType_t compute,
                                   cublasGemmAlgo_t) {
    if (!supported(Atype, Btype, Ctype, compute)) return CUBLAS_STATUS_NOT_SUPPORTED;
    const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
    simt::submit([=] {
        for (int bt = 0; bt < batch; ++bt)
            gemm_one(transa, transb, m, n, k, al, Aarray[bt], Atype, lda, Barray[bt], ldb, be,
                     static_cast<float*>(Carray[bt]), ldc);
    });
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
