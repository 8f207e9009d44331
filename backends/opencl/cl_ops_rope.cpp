// Rotary position embedding, in place (kernels_cl/rope.cl).
#include "cl_device.h"
#include "shared/mt_math.h"

namespace moetrain::opencl {

void ClDevice::rope(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
                    int64_t pos0, const Tensor& pos_dev, bool inverse) {
    MT_CHECK(hd % 2 == 0, "rope: head_dim ", hd, " must be even");
    MT_CHECK(pos0 >= 0 && pos0 + T <= MT_POS_LIMIT, "rope: positions ", pos0, "..", pos0 + T,
             " out of range");
    int64_t n = B * T * nh * hd;
    DevValue pd = dev_value(pos_dev, "rope: pos_dev");
    if (n == 0) return;
    launch("rope", "mt_rope", items(B * T * (hd / 2)), arg(x, n, "rope: x"), cl_long{B}, cl_long{T},
           cl_long{nh}, cl_long{hd}, theta, cl_long{pos0}, pd, cl_int{inverse}, error_word());
}

}  // namespace moetrain::opencl
