// CudaGraphRuntime: cudaStreamBeginCapture / EndCapture / GraphInstantiate / GraphLaunch.
#include "cuda/cuda_graph_runtime.h"

#include <cuda_runtime_api.h>

#include "cuda/cuda_errors.h"

namespace moetrain::cuda {

void CudaGraphRuntime::begin_capture() {
    ctx_.make_current();
    check_cuda(cudaStreamBeginCapture(ctx_.stream(), cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture");
    ctx_.set_capturing(true);
}

void* CudaGraphRuntime::end_capture(std::string* why) {
    ctx_.set_capturing(false);
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(ctx_.stream(), &graph);
    if (e != cudaSuccess || !graph) {
        cudaGetLastError();  // an invalidated capture is reported here, not sticky
        *why = "cudaStreamEndCapture: " + describe(e);
        if (graph) cudaGraphDestroy(graph);
        return nullptr;
    }
    cudaGraphExec_t exec = nullptr;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *why = "cudaGraphInstantiate: " + describe(e);
        return nullptr;
    }
    return exec;
}

void CudaGraphRuntime::launch(void* graph) {
    ctx_.make_current();
    check_cuda(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), ctx_.stream()),
               "cudaGraphLaunch");
}

void CudaGraphRuntime::destroy(void* graph) {
    // Never under capture (the cache evicts after end_capture); the stream may still run it.
    cudaStreamSynchronize(ctx_.stream());
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));  // fails only at teardown
}

}  // namespace moetrain::cuda
