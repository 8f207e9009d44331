// CPU activations (gelu-tanh, relu, silu), SwiGLU and the row-wise stable softmax; the
// per-element formulas are the shared ones of backends/shared/mt_math.h.
#include <algorithm>
#include <cmath>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_rowmath.h"
#include "shared/mt_math.h"

namespace moetrain {
namespace {

float act_value(Act a, float z) {
    switch (a) {
        case Act::gelu: return mt_gelu(z);
        case Act::relu: return mt_relu(z);
        case Act::silu: return mt_silu(z);
    }
    return 0.0f;
}

float act_derivative(Act a, float z) {
    switch (a) {
        case Act::gelu: return mt_gelu_grad(z);
        case Act::relu: return mt_relu_grad(z);
        case Act::silu: return mt_silu_grad(z);
    }
    return 0.0f;
}
}  // namespace

void CpuDevice::act_fwd(Act act, const Tensor& y, const Tensor& x, int64_t n) {
    check_sizes("act_fwd", {n});
    float* py = f32(y, n, "act_fwd", "y");
    const float* px = f32(x, n, "act_fwd", "x");
#pragma omp parallel for schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) py[i] = act_value(act, px[i]);
}

void CpuDevice::act_bwd(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x, int64_t n) {
    check_sizes("act_bwd", {n});
    float* pdx = f32(dx, n, "act_bwd", "dx");
    const float* pdy = f32(dy, n, "act_bwd", "dy");
    const float* px = f32(x, n, "act_bwd", "x");
#pragma omp parallel for schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) pdx[i] = pdy[i] * act_derivative(act, px[i]);
}

void CpuDevice::swiglu_fwd(const Tensor& h, const Tensor& gate, const Tensor& up, int64_t n) {
    check_sizes("swiglu_fwd", {n});
    float* ph = f32(h, n, "swiglu_fwd", "h");
    const float* pg = f32(gate, n, "swiglu_fwd", "gate");
    const float* pu = f32(up, n, "swiglu_fwd", "up");
#pragma omp parallel for schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) ph[i] = mt_silu(pg[i]) * pu[i];
}

void CpuDevice::swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                           const Tensor& gate, const Tensor& up, int64_t n) {
    check_sizes("swiglu_bwd", {n});
    float* pdg = f32(dgate, n, "swiglu_bwd", "dgate");
    float* pdu = f32(dup, n, "swiglu_bwd", "dup");
    const float* pdh = f32(dh, n, "swiglu_bwd", "dh");
    const float* pg = f32(gate, n, "swiglu_bwd", "gate");
    const float* pu = f32(up, n, "swiglu_bwd", "up");
#pragma omp parallel for schedule(static) if (n > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
        const float g = pg[i], u = pu[i], d = pdh[i];  // read first: outputs may alias inputs
        pdg[i] = d * u * mt_silu_grad(g);
        pdu[i] = d * mt_silu(g);
    }
}

void CpuDevice::softmax(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
    check_sizes("softmax", {rows, cols});
    float* py = f32(y, rows * cols, "softmax", "y");
    const float* px = f32(x, rows * cols, "softmax", "x");
#pragma omp parallel for schedule(static) if (rows * cols > cpu::kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = px + r * cols;
        float* yr = py + r * cols;
        const float lse = static_cast<float>(cpu::row_logsumexp(xr, cols));
        for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - lse);
    }
}

}  // namespace moetrain
