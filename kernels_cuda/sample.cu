// CudaDevice ops: sampling. Each turns its tensors into pointers and calls the launcher of
// sample.cuh on the device stream (docs/CUDA.md).
#include <climits>

#include "sample.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::sample_impl(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                             const SampleArgs& s) {
    const char* op = "sample";
    MT_CHECK(V <= INT_MAX, op, ": vocabulary size ", V, " outside 1..", INT_MAX);
    int32_t* ids = i32(out_ids);
    const float* l = f32(logits);
    auto* tmp = static_cast<uint64_t*>(scratch(mtk::sample_scratch_bytes(B, V)));
    mtk::SampleParams p{s.temperature, s.top_k, s.top_p, s.seed, s.step, device_value(s.step_dev)};
    mtk::sample(stream(op), ids, l, B, V, p, tmp);
    launched(op);
}

}  // namespace moetrain::cuda
