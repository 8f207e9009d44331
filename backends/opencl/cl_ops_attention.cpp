// Causal flash-style attention forward and backward (kernels_cl/attention.cl).
#include "cl_device.h"

namespace moetrain::opencl {
namespace {

constexpr int64_t kMaxHeadDim = 256;  // MT_ATTN_MAX_HD in attention.cl

// The backend's head size limit (the AttnDims rules are checked by the front door).
void check_head_dim(const AttnDims& d, const char* op) {
    MT_CHECK(d.hd <= kMaxHeadDim, op, ": head_dim ", d.hd, " exceeds the OpenCL backend's ",
             kMaxHeadDim);
}

}  // namespace

void ClDevice::attention_fwd_impl(const Tensor& o, const Tensor& lse, const Tensor& q,
                                  const Tensor& k, const Tensor& v, const AttnDims& d,
                                  float scale) {
    check_head_dim(d, "attention_fwd");
    const int64_t rows = d.B * d.H * d.Tq;
    if (rows == 0) return;
    launch("attention", "mt_attention_fwd", items(rows, 64), arg(o), arg(lse), arg(q), arg(k),
           arg(v), cl_long{d.B}, cl_long{d.Tq}, cl_long{d.Tk}, cl_long{d.S}, cl_long{d.H},
           cl_long{d.K}, static_cast<cl_int>(d.hd), scale, dev_value(d.tk_dev), error_word());
}

void ClDevice::attention_bwd_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                  const Tensor& dout, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& o, const Tensor& lse,
                                  const AttnDims& d, float scale) {
    check_head_dim(d, "attention_bwd");
    const int64_t rows = d.B * d.H * d.Tq;
    DevPtr pdq = arg(dq), pdk = arg(dk);
    DevPtr pdv = arg(dv), pdo = arg(dout);
    DevPtr pq = arg(q), pk = arg(k);
    DevPtr pv = arg(v), po = arg(o);
    DevPtr plse = arg(lse);
    DevPtr delta = scratch(0, static_cast<size_t>(rows) * sizeof(float));
    cl_long B = d.B, Tq = d.Tq, Tk = d.Tk, S = d.S, H = d.H, K = d.K;
    cl_int hd = static_cast<cl_int>(d.hd);
    launch("attention", "mt_attention_bwd_delta", items(rows, 64), delta, pdo, po, B, Tq, H, hd);
    DevValue tk = dev_value(d.tk_dev);
    launch("attention", "mt_attention_bwd_dq", items(rows, 64), pdq, pdo, pq, pk, pv, plse, delta,
           B, Tq, Tk, S, H, K, hd, scale, tk, error_word());
    launch("attention", "mt_attention_bwd_dkdv", items(d.B * d.K * d.S, 64), pdk, pdv, pdo, pq, pk,
           pv, plse, delta, B, Tq, Tk, S, H, K, hd, scale, tk, error_word());
}

}  // namespace moetrain::opencl
