// CudaDevice ops: the KV-cache append. Each turns its tensors into pointers and calls the launcher
// of kv_cache.cuh on the device stream (docs/CUDA.md).
#include "kv_cache.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::kv_append_impl(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T,
                                int64_t S, int64_t row_len, int64_t pos0, const Tensor& pos_dev) {
    const char* op = "kv_append";
    void* dst = raw(cache);
    const void* src = raw(rows);
    const int32_t* pd = device_value(pos_dev);
    mtk::kv_append(stream(op), dst, src, static_cast<int>(dtype_size(cache.dtype)), B, T, S,
                   row_len, pos0, pd, error_word());
    launched(op);
}

}  // namespace moetrain::cuda
