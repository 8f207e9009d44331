// AdamW, 8-bit AdamW and SGD parameter updates with gradient scaling and global-norm clipping
// (kernels_cl/optimizer.cl).
#include "cl_device.h"
#include "shared/mt_qmap_table.h"

namespace moetrain::opencl {

void ClDevice::adamw_impl(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                          int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                          float grad_scale) {
    if (n == 0) return;
    launch("optimizer", "mt_adamw", items(n), arg(p), arg(g), arg(m), arg(v), cl_long{n}, a.lr,
           a.b1, a.b2, a.eps, a.wd, a.bc1, a.bc2, arg(gnorm_sq), cl_int{!gnorm_sq.empty()}, clip,
           grad_scale);
}

void ClDevice::adamw8bit_impl(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                              const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                              int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                              float grad_scale) {
    if (n == 0) return;
    const int64_t blocks = (n + MT_QBLOCK - 1) / MT_QBLOCK;
    const DevPtr pp = arg(p), pg = arg(g), mc = arg(m_codes), vc = arg(v_codes), ma = arg(m_absmax),
                 va = arg(v_absmax), norm = arg(gnorm_sq);
    // The maps go to scratch ahead of the kernel (in-order queue; the host table is static).
    const DevPtr table = scratch(0, MT_QMAP_LEN * sizeof(float));
    cl_check(clEnqueueWriteBuffer(queue(), table.mem, CL_FALSE, 0, MT_QMAP_LEN * sizeof(float),
                                  qmap_host_table(), 0, nullptr, nullptr),
             "adamw8bit: uploading the quantisation maps");
    launch("optimizer", "mt_adamw8bit", reduce_groups(blocks), pp, pg, mc, vc, ma, va, table,
           cl_long{n}, a.lr, a.b1, a.b2, a.eps, a.wd, a.bc1, a.bc2, norm, cl_int{!gnorm_sq.empty()},
           clip, grad_scale);
}

void ClDevice::sgd_impl(const Tensor& p, const Tensor& g, int64_t n, float lr,
                        const Tensor& gnorm_sq, float clip, float grad_scale) {
    if (n == 0) return;
    launch("optimizer", "mt_sgd", items(n), arg(p), arg(g), cl_long{n}, lr, arg(gnorm_sq),
           cl_int{!gnorm_sq.empty()}, clip, grad_scale);
}

}  // namespace moetrain::opencl
