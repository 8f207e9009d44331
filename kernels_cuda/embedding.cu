// CudaDevice ops: embedding lookup and its gradient. Each turns its tensors into pointers and calls
// the launcher of embedding.cuh on the device stream (docs/CUDA.md).
#include "embedding.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::embedding_fwd_impl(const Tensor& out, const Tensor& table, const Tensor& ids,
                                    int64_t n, int64_t dim, bool accumulate) {
    mtk::embedding_fwd(stream("embedding_fwd"), f32(out), f32(table), table.numel() / dim, i32(ids),
                       n, dim, accumulate, error_word());
    launched("embedding_fwd");
}

void CudaDevice::embedding_bwd_impl(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                    int64_t n, int64_t dim) {
    mtk::embedding_bwd(stream("embedding_bwd"), f32(dtable), dtable.numel() / dim, f32(dout),
                       i32(ids), n, dim, error_word());
    launched("embedding_bwd");
}

}  // namespace moetrain::cuda
