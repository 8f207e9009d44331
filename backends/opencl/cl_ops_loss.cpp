// Cross-entropy loss and its gradient (kernels_cl/loss.cl).
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::cross_entropy_impl(const Tensor& losses, const Tensor& logits, const Tensor& targets,
                                  int64_t N, int64_t V, float grad_scale, const Tensor& dlogits) {
    MT_CHECK(V > 0 && V < (int64_t{1} << 31), "cross_entropy: vocabulary size ", V,
             " out of range");
    if (N == 0) return;
    const Tensor& grad = dlogits ? dlogits : logits;  // empty: in place
    launch("loss", "mt_cross_entropy", reduce_groups(N), arg(losses), arg(logits), arg(targets),
           cl_long{V}, grad_scale, error_word(), arg(grad), float_code(grad.dtype));
    check_device_error();  // a bad target must fail here, not at a later download
}

}  // namespace moetrain::opencl
