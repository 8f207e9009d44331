// Causal flash-style attention forward and backward (kernels_cl/attention.cl).
#include "cl_device.h"

namespace moetrain::opencl {
namespace {

constexpr int64_t kMaxHeadDim = 256;  // MT_ATTN_MAX_HD in attention.cl

void check_dims(const AttnDims& d, const char* op) {
    MT_CHECK(d.B >= 0 && d.Tq >= 0 && d.H > 0 && d.K > 0 && d.hd > 0, op, ": bad sizes");
    MT_CHECK(d.H % d.K == 0, op, ": n_heads ", d.H, " is not a multiple of n_kv_heads ", d.K);
    MT_CHECK(d.Tq <= d.Tk && d.Tk <= d.S, op, ": need Tq <= Tk <= S, got Tq=", d.Tq,
             " Tk=", d.Tk, " S=", d.S);
    MT_CHECK(d.hd <= kMaxHeadDim, op, ": head_dim ", d.hd, " exceeds the OpenCL backend's ",
             kMaxHeadDim);
}

}  // namespace

void ClDevice::attention_fwd(const Tensor& o, const Tensor& lse, const Tensor& q,
                             const Tensor& k, const Tensor& v, const AttnDims& d, float scale) {
    check_dims(d, "attention_fwd");
    int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd, rows = d.B * d.H * d.Tq;
    if (rows == 0) return;
    launch("attention", "mt_attention_fwd", items(rows, 64), arg(o, nq, "attention_fwd: o"),
           arg(lse, rows, "attention_fwd: lse"), arg(q, nq, "attention_fwd: q"),
           arg(k, nk, "attention_fwd: k"), arg(v, nk, "attention_fwd: v"), cl_long{d.B},
           cl_long{d.Tq}, cl_long{d.Tk}, cl_long{d.S}, cl_long{d.H}, cl_long{d.K},
           static_cast<cl_int>(d.hd), scale, dev_value(d.tk_dev, "attention_fwd: tk_dev"),
           error_word());
}

void ClDevice::attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& o, const Tensor& lse,
                             const AttnDims& d, float scale) {
    check_dims(d, "attention_bwd");
    int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd, rows = d.B * d.H * d.Tq;
    DevPtr pdq = arg(dq, nq, "attention_bwd: dq"), pdk = arg(dk, nk, "attention_bwd: dk");
    DevPtr pdv = arg(dv, nk, "attention_bwd: dv"), pdo = arg(dout, nq, "attention_bwd: dout");
    DevPtr pq = arg(q, nq, "attention_bwd: q"), pk = arg(k, nk, "attention_bwd: k");
    DevPtr pv = arg(v, nk, "attention_bwd: v"), po = arg(o, nq, "attention_bwd: o");
    DevPtr plse = arg(lse, rows, "attention_bwd: lse");
    DevPtr delta = scratch(0, static_cast<size_t>(rows) * sizeof(float));
    cl_long B = d.B, Tq = d.Tq, Tk = d.Tk, S = d.S, H = d.H, K = d.K;
    cl_int hd = static_cast<cl_int>(d.hd);
    launch("attention", "mt_attention_bwd_delta", items(rows, 64), delta, pdo, po, B, Tq, H, hd);
    DevValue tk = dev_value(d.tk_dev, "attention_bwd: tk_dev");
    launch("attention", "mt_attention_bwd_dq", items(rows, 64), pdq, pdo, pq, pk, pv, plse, delta,
           B, Tq, Tk, S, H, K, hd, scale, tk, error_word());
    launch("attention", "mt_attention_bwd_dkdv", items(d.B * d.K * d.S, 64), pdk, pdv, pdo, pq, pk,
           pv, plse, delta, B, Tq, Tk, S, H, K, hd, scale, tk, error_word());
}

}  // namespace moetrain::opencl
