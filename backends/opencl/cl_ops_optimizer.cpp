// AdamW, 8-bit AdamW and SGD parameter updates with gradient scaling and global-norm clipping
// (kernels_cl/optimizer.cl).
#include "cl_device.h"
#include "shared/mt_qmap_table.h"

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

void ClDevice::adamw8bit(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                         const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                         int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                         float grad_scale) {
    MT_CHECK(n >= 0, "adamw8bit: negative size ", n);
    MT_CHECK(clip <= 0 || !gnorm_sq.empty(), "adamw8bit: clipping needs the squared gradient norm");
    MT_CHECK(a.bc1 > 0 && a.bc2 > 0, "adamw8bit: bias corrections must be positive (step >= 1)");
    if (n == 0) return;
    const int64_t blocks = (n + MT_QBLOCK - 1) / MT_QBLOCK;
    const DevPtr pp = arg(p, n, "adamw8bit: p"), pg = arg(g, n, "adamw8bit: g"),
                 mc = arg(m_codes, n, "adamw8bit: m_codes", DType::u8),
                 vc = arg(v_codes, n, "adamw8bit: v_codes", DType::u8),
                 ma = arg(m_absmax, blocks, "adamw8bit: m_absmax"),
                 va = arg(v_absmax, blocks, "adamw8bit: v_absmax"),
                 norm = opt_arg(gnorm_sq, 1, "adamw8bit: gnorm_sq");
    // The maps go to scratch ahead of the kernel (in-order queue; the host table is static).
    const DevPtr table = scratch(0, MT_QMAP_LEN * sizeof(float));
    cl_check(clEnqueueWriteBuffer(queue(), table.mem, CL_FALSE, 0, MT_QMAP_LEN * sizeof(float),
                                  qmap_host_table(), 0, nullptr, nullptr),
             "adamw8bit: uploading the quantisation maps");
    launch("optimizer", "mt_adamw8bit", reduce_groups(blocks), pp, pg, mc, vc, ma, va, table,
           cl_long{n}, a.lr, a.b1, a.b2, a.eps, a.wd, a.bc1, a.bc2, norm,
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
