// CudaDevice construction, what every op family uses (stream, launch check, error word,
// scratch), and the memory ops: zeroed allocations from the caching allocator, transfers on the
// device stream (download waits) and device-to-device copies (overlap-safe). fill and convert
// launch kernels: kernels_cuda/elementwise.cu and convert.cu.
#include "cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <utility>

#include "cuda/cuda_context.h"
#include "cuda/cuda_errors.h"
#include "cuda/cuda_graph_runtime.h"

namespace moetrain::cuda {

std::unique_ptr<Device> create_cuda_device(int index, const DeviceOptions& opts) {
    check_cuda(cudaSetDevice(index), "cudaSetDevice");
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.0f GiB",
                  static_cast<double>(prop.totalGlobalMem) / (1 << 30));
    std::string name = std::string(prop.name) + " (" MOETRAIN_CUDA_BACKEND_NAME ":" +
                       std::to_string(index) + ", " + mem + ", compute capability " +
                       std::to_string(prop.major) + "." + std::to_string(prop.minor) + ")";
    return std::make_unique<CudaDevice>(index, std::move(name), opts.cuda_graphs,
                                        prop.major * 10 + prop.minor, prop.multiProcessorCount);
}

CudaDevice::CudaDevice(int index, std::string name, bool graphs, int cc, int sm_count)
    : ctx_(std::make_unique<CudaContext>(index)),
      name_(std::move(name)),
      cc_(cc),
      sm_count_(sm_count),
      grouped_cutlass_(grouped_gemm_choice() == "cutlass"),
      attention_cudnn_(attention_choice() == "cudnn"),
      graph_runtime_(std::make_unique<CudaGraphRuntime>(*ctx_)),
      graphs_(*graph_runtime_, graphs) {}

CudaDevice::~CudaDevice() = default;

StepRun CudaDevice::run_recorded(const std::string& key, const std::function<void()>& record) {
    return graphs_.run(key, record);
}

void CudaDevice::not_capturing(const char* what) const {
    MT_CHECK(!ctx_->capturing(), what, " inside a captured CUDA graph");
}

mtk::Stream CudaDevice::stream(const char*) {
    ctx_->make_current();
    return ctx_->stream();
}

void CudaDevice::launched(const char* op) {
    check_launch(op);
}

int32_t* CudaDevice::error_word() {
    return ctx_->error_word();
}

void* CudaDevice::scratch(size_t bytes) {
    return ctx_->scratch(bytes);
}

void CudaDevice::upload_static(void* dst, const void* src, size_t bytes, const char* what) {
    ctx_->make_current();
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_->stream()), what);
}

void CudaDevice::check_device_error() {
    if (ctx_->capturing()) return;
    int32_t word[2] = {0, 0};
    ctx_->make_current();
    check_cuda(cudaMemcpyAsync(word, ctx_->error_word(), sizeof word, cudaMemcpyDeviceToHost,
                               ctx_->stream()),
               "cudaMemcpyAsync (reading the device error word)");
    ctx_->synchronize();
    if (word[0] == 0) return;
    check_cuda(cudaMemsetAsync(ctx_->error_word(), 0, sizeof word, ctx_->stream()),
               "cudaMemsetAsync (clearing the device error word)");
    fail(mtk::error_message(word[0]), " ", word[1], " (detected on ", name_, ")");
}

// ---- memory ---------------------------------------------------------------------------------

std::shared_ptr<Buffer> CudaDevice::alloc_buffer(size_t bytes) {
    not_capturing("alloc");
    ctx_->make_current();
    auto buf = std::make_shared<CudaBuffer>(this, bytes, ctx_->allocator_ptr());
    if (bytes)
        check_cuda(cudaMemsetAsync(buf->data(), 0, bytes, ctx_->stream()),
                   "cudaMemsetAsync (zero a new buffer)");
    return buf;
}

void CudaDevice::upload_impl(const Tensor& dst, const void* src) {
    void* d = raw(dst);
    not_capturing("upload");
    if (!dst.bytes()) return;
    ctx_->make_current();
    check_cuda(cudaMemcpyAsync(d, src, dst.bytes(), cudaMemcpyHostToDevice, ctx_->stream()),
               "cudaMemcpyAsync host -> device (upload)");
}

void CudaDevice::download_impl(void* dst, const Tensor& src) {
    void* s = raw(src);
    not_capturing("download");
    ctx_->make_current();
    if (src.bytes())
        check_cuda(cudaMemcpyAsync(dst, s, src.bytes(), cudaMemcpyDeviceToHost, ctx_->stream()),
                   "cudaMemcpyAsync device -> host (download)");
    check_device_error();  // waits for the copy, then reports any invalid index seen so far
}

void CudaDevice::copy_impl(const Tensor& dst, const Tensor& src) {
    char* d = static_cast<char*>(raw(dst));
    const char* s = static_cast<const char*>(raw(src));
    const size_t bytes = dst.bytes();
    if (!bytes || d == s) return;
    ctx_->make_current();
    if (d < s + bytes && s < d + bytes) {  // overlapping views: go through scratch (memmove)
        void* tmp = ctx_->scratch(bytes);
        check_cuda(cudaMemcpyAsync(tmp, s, bytes, cudaMemcpyDeviceToDevice, ctx_->stream()),
                   "cudaMemcpyAsync (copy)");
        s = static_cast<const char*>(tmp);
    }
    check_cuda(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, ctx_->stream()),
               "cudaMemcpyAsync (copy)");
}

void CudaDevice::synchronize() {
    not_capturing("synchronize");
    check_device_error();
}

}  // namespace moetrain::cuda
