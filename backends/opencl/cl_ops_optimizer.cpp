// AdamW and SGD parameter updates with gradient scaling and global-norm clipping
// (kernels_cl/optimizer.cl).
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                     int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                     float grad_scale) {
    MT_CHECK(clip <= 0 || !gnorm_sq.empty(), "adamw: clipping needs the squared gradient norm");
    if (n == 0) return;
    launch("optimizer", "mt_adamw", items(n), arg(p, n, "adamw: p"), arg(g, n, "adamw: g"),
           arg(m, n, "adamw: m"), arg(v, n, "adamw: v"), cl_long{n}, a.lr, a.b1, a.b2, a.eps,
           a.wd, a.bc1, a.bc2, opt_arg(gnorm_sq, 1, "adamw: gnorm_sq"),
           cl_int{!gnorm_sq.empty()}, clip, grad_scale);
}

void ClDevice::sgd(const Tensor& p, const Tensor& g, int64_t n, float lr, const Tensor& gnorm_sq,
                   float clip, float grad_scale) {
    MT_CHECK(clip <= 0 || !gnorm_sq.empty(), "sgd: clipping needs the squared gradient norm");
    if (n == 0) return;
    launch("optimizer", "mt_sgd", items(n), arg(p, n, "sgd: p"), arg(g, n, "sgd: g"), cl_long{n},
           lr, opt_arg(gnorm_sq, 1, "sgd: gnorm_sq"), cl_int{!gnorm_sq.empty()}, clip,
           grad_scale);
}

}  // namespace moetrain::opencl
