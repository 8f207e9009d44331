// Activations, SwiGLU and the row softmax (kernels_cl/activations.cl).
#include "cl_device.h"

namespace moetrain::opencl {
namespace {

cl_int act_code(Act a) {
    switch (a) {
        case Act::gelu: return 0;
        case Act::relu: return 1;
        case Act::silu: return 2;
    }
    fail("unknown activation ", static_cast<int>(a));
}

}  // namespace

void ClDevice::act_fwd(Act act, const Tensor& y, const Tensor& x, int64_t n) {
    if (n == 0) return;
    launch("activations", "mt_act_fwd", items(n), arg(y, n, "act_fwd: y"),
           arg(x, n, "act_fwd: x"), cl_long{n}, act_code(act));
}

void ClDevice::act_bwd(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x, int64_t n) {
    if (n == 0) return;
    launch("activations", "mt_act_bwd", items(n), arg(dx, n, "act_bwd: dx"),
           arg(dy, n, "act_bwd: dy"), arg(x, n, "act_bwd: x"), cl_long{n}, act_code(act));
}

void ClDevice::swiglu_fwd(const Tensor& h, const Tensor& gate, const Tensor& up, int64_t n) {
    if (n == 0) return;
    launch("activations", "mt_swiglu_fwd", items(n), arg(h, n, "swiglu_fwd: h"),
           arg(gate, n, "swiglu_fwd: gate"), arg(up, n, "swiglu_fwd: up"), cl_long{n});
}

void ClDevice::swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                          const Tensor& gate, const Tensor& up, int64_t n) {
    if (n == 0) return;
    launch("activations", "mt_swiglu_bwd", items(n), arg(dgate, n, "swiglu_bwd: dgate"),
           arg(dup, n, "swiglu_bwd: dup"), arg(dh, n, "swiglu_bwd: dh"),
           arg(gate, n, "swiglu_bwd: gate"), arg(up, n, "swiglu_bwd: up"), cl_long{n});
}

void ClDevice::softmax(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
    if (rows == 0 || cols == 0) return;
    int64_t n = rows * cols;
    launch("activations", "mt_softmax", reduce_groups(rows), arg(y, n, "softmax: y"),
           arg(x, n, "softmax: x"), cl_long{cols});
}

}  // namespace moetrain::opencl
