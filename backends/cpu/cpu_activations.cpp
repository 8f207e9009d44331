// CPU activations (gelu-tanh, relu, silu), SwiGLU and the row-wise stable softmax; the
// per-element formulas are the shared ones of backends/shared/mt_math.h, evaluated with the
// vectorisable exp / tanh of cpu_vecmath.h so every loop here compiles to SIMD code.
#include <algorithm>
#include <cmath>

#include "cpu/cpu_device.h"
#include "cpu/cpu_float_out.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_rowmath.h"
#include "cpu/cpu_vecmath.h"
#include "shared/mt_math.h"

namespace moetrain {
namespace {

template <Act A>
float act_value(float z) {
    if constexpr (A == Act::gelu) return mt_gelu(z);
    if constexpr (A == Act::relu) return mt_relu(z);
    return mt_silu(z);
}

template <Act A>
float act_derivative(float z) {
    if constexpr (A == Act::gelu) return mt_gelu_grad(z);
    if constexpr (A == Act::relu) return mt_relu_grad(z);
    return mt_silu_grad(z);
}

// y of dtype t: f32, or the f32 values rounded to bf16 / f16 (cpu_float_out.h).
template <Act A>
void act_fwd_loop(void* y, DType t, const float* x, int64_t n) {
    cpu::map_out(y, t, n, [x](int64_t i) { return act_value<A>(x[i]); });
}

// dx of dtype t (as act_fwd_loop's y); an f32 dx may be dy (element i is read before written).
template <Act A>
void act_bwd_loop(void* dx, DType t, const float* dy, const float* x, int64_t n) {
    cpu::map_out(dx, t, n, [dy, x](int64_t i) { return dy[i] * act_derivative<A>(x[i]); });
}

}  // namespace

void CpuDevice::act_fwd_impl(Act act, const Tensor& y, const Tensor& x, int64_t n) {
    void* py = raw(y);
    const float* px = f32(x);
    switch (act) {
        case Act::gelu:
            act_fwd_loop<Act::gelu>(py, y.dtype, px, n);
            break;
        case Act::relu:
            act_fwd_loop<Act::relu>(py, y.dtype, px, n);
            break;
        case Act::silu:
            act_fwd_loop<Act::silu>(py, y.dtype, px, n);
            break;
    }
}

void CpuDevice::act_bwd_impl(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x,
                             int64_t n) {
    const auto [pdy, px] = f32s(dy, x);
    void* pdx = raw(dx);
    switch (act) {
        case Act::gelu:
            act_bwd_loop<Act::gelu>(pdx, dx.dtype, pdy, px, n);
            break;
        case Act::relu:
            act_bwd_loop<Act::relu>(pdx, dx.dtype, pdy, px, n);
            break;
        case Act::silu:
            act_bwd_loop<Act::silu>(pdx, dx.dtype, pdy, px, n);
            break;
    }
}

void CpuDevice::swiglu_fwd_impl(const Tensor& h, const Tensor& gate, const Tensor& up, int64_t n) {
    const auto [pg, pu] = f32s(gate, up);
    cpu::map_out(raw(h), h.dtype, n, [pg, pu](int64_t i) { return mt_silu(pg[i]) * pu[i]; });
}

void CpuDevice::swiglu_bwd_impl(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                                const Tensor& gate, const Tensor& up, int64_t n) {
    const auto [pdg, pdu, pdh, pg, pu] = f32s(dgate, dup, dh, gate, up);
    // Element i is read before it is written, so outputs may alias inputs (also per SIMD lane).
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
        const float g = pg[i], u = pu[i], d = pdh[i];
        pdg[i] = d * u * mt_silu_grad(g);
        pdu[i] = d * mt_silu(g);
    }
}

void CpuDevice::softmax_impl(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
    float* py = f32(y);
    const float* px = f32(x);
#pragma omp parallel for schedule(static) if (rows * cols > cpu::kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = px + r * cols;
        float* yr = py + r * cols;
        const float lse = static_cast<float>(cpu::row_logsumexp(xr, cols));
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = cpu::exp_f32(xr[c] - lse);
    }
}

}  // namespace moetrain
