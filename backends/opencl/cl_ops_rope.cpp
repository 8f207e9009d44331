// Rotary position embedding, in place (kernels_cl/rope.cl).
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::rope(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
                    int64_t pos0, bool inverse) {
    MT_CHECK(hd % 2 == 0, "rope: head_dim ", hd, " must be even");
    MT_CHECK(pos0 >= 0 && pos0 + T <= (int64_t{1} << 30), "rope: positions ", pos0, "..",
             pos0 + T, " out of range");
    int64_t n = B * T * nh * hd;
    if (n == 0) return;
    launch("rope", "mt_rope", items(B * T * (hd / 2)), arg(x, n, "rope: x"), cl_long{B}, cl_long{T},
           cl_long{nh}, cl_long{hd}, theta, cl_long{pos0}, cl_int{inverse});
}

}  // namespace moetrain::opencl
