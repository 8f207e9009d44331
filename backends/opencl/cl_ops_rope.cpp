// Rotary position embedding, in place (kernels_cl/rope.cl).
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::rope_impl(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
                         int64_t pos0, const Tensor& pos_dev, bool inverse) {
    int64_t n = B * T * nh * hd;
    DevValue pd = dev_value(pos_dev);
    if (n == 0) return;
    launch("rope", "mt_rope", items(B * T * (hd / 2)), arg(x), cl_long{B}, cl_long{T}, cl_long{nh},
           cl_long{hd}, theta, cl_long{pos0}, pd, cl_int{inverse}, error_word());
}

}  // namespace moetrain::opencl
