// Activations, SwiGLU and the row softmax (kernels_cl/activations.cl).
#include "cl_device.h"

namespace moetrain::opencl {
namespace {

cl_int act_code(Act a) {
    switch (a) {
        case Act::gelu:
            return 0;
        case Act::relu:
            return 1;
        case Act::silu:
            return 2;
    }
    fail("unknown activation ", static_cast<int>(a));
}

}  // namespace

void ClDevice::act_fwd_impl(Act act, const Tensor& y, const Tensor& x, int64_t n) {
    if (n == 0) return;
    launch("activations", "mt_act_fwd", items(n), arg(y), arg(x), cl_long{n}, act_code(act),
           float_code(y.dtype));
}

void ClDevice::act_bwd_impl(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x,
                            int64_t n) {
    if (n == 0) return;
    launch("activations", "mt_act_bwd", items(n), arg(dx), arg(dy), arg(x), cl_long{n},
           act_code(act), float_code(dx.dtype));
}

void ClDevice::swiglu_fwd_impl(const Tensor& h, const Tensor& gate, const Tensor& up, int64_t n) {
    if (n == 0) return;
    launch("activations", "mt_swiglu_fwd", items(n), arg(h), arg(gate), arg(up), cl_long{n},
           float_code(h.dtype));
}

void ClDevice::swiglu_bwd_impl(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                               const Tensor& gate, const Tensor& up, int64_t n) {
    if (n == 0) return;
    launch("activations", "mt_swiglu_bwd", items(n), arg(dgate), arg(dup), arg(dh), arg(gate),
           arg(up), cl_long{n});
}

void ClDevice::softmax_impl(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
    if (rows == 0 || cols == 0) return;
    launch("activations", "mt_softmax", reduce_groups(rows), arg(y), arg(x), cl_long{cols});
}

}  // namespace moetrain::opencl
