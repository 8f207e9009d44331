// CudaDevice ops: RoPE (forward and inverse) at a host and / or device-side position. Each turns
// its tensors into pointers and calls the launcher of rope.cuh on the device stream (docs/CUDA.md).
#include <climits>

#include "rope.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::rope_impl(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd,
                           float theta, int64_t pos0, const Tensor& pos_dev, bool inverse) {
    MT_CHECK(pos0 + T <= INT_MAX, "rope: position ", pos0 + T, " too large");
    float* px = f32(x);
    const int32_t* pd = device_value(pos_dev);
    mtk::rope(stream("rope"), px, B, T, nh, hd, theta, pos0, pd, inverse, error_word());
    launched("rope");
}

}  // namespace moetrain::cuda
