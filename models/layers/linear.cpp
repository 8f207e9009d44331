// Linear layer y = x @ W^T (+ b) with W stored [out, in] (MODEL.md), forward and backward,
// as GEMMs on the device. The products run at the precision of the weight tensor: an f32 W
// means fp32 products, a bf16 / f16 W (the 16-bit working copy of mixed precision) means
// every product of this layer, the weight gradient included, rounds its operands to that
// type and accumulates in fp32 (GemmArgs::compute).
#include "layers/layers.h"

namespace moetrain {

GemmArgs linear_fwd_gemm(const Tensor& y, const Tensor& x, const LinearW& w, int64_t rows,
                         float beta) {
    GemmArgs g = dense_gemm(Trans::N, Trans::T, rows, w.out, w.in, x, w.w, y);
    g.beta = beta;
    g.compute = w.w.dtype;
    return g;
}

GemmArgs linear_dx_gemm(const Tensor& dx, const Tensor& dy, const LinearW& w, int64_t rows,
                        bool accumulate_dx) {
    // dx [rows, in] = dy [rows, out] @ W [out, in]
    GemmArgs g = dense_gemm(Trans::N, Trans::N, rows, w.in, w.out, dy, w.w, dx);
    g.beta = accumulate_dx ? 1.0f : 0.0f;
    g.compute = w.w.dtype;
    return g;
}

GemmArgs linear_dw_gemm(const LinearW& gw, const Tensor& dy, const Tensor& x, const LinearW& w,
                        int64_t rows) {
    // dW [out, in] += dy^T [out, rows] @ x [rows, in]
    GemmArgs g = dense_gemm(Trans::T, Trans::N, w.out, w.in, rows, dy, x, gw.w);
    g.beta = 1.0f;
    g.compute = w.w.dtype;
    return g;
}

// With a bias, one product whose epilogue adds it (Device::gemm_epilogue): y is written once.
void linear_fwd(Device& dev, const Tensor& y, const Tensor& x, const LinearW& w, int64_t rows,
                float beta) {
    if (rows == 0) return;
    if (w.b)
        dev.gemm_epilogue(linear_fwd_gemm(y, x, w, rows, beta), GemmEpilogue{.bias = w.b});
    else
        dev.gemm(linear_fwd_gemm(y, x, w, rows, beta));
}

bool reads_dy16(const Tensor& dy16, const LinearW& w) {
    return dy16 && w.w.dtype != DType::f32 && dy16.dtype == w.w.dtype;
}

Tensor round_dy_once(Device& dev, const Tensor& dy, const Tensor& dy16, const LinearW& w,
                     int64_t rows) {
    if (!reads_dy16(dy16, w) || dy.dtype != DType::f32) return dy;
    MT_CHECK(dy16.numel() >= rows * w.out, "dy16 holds ", dy16.numel(), " elements, not ",
             rows * w.out);
    const Tensor d = dy16.view(0, {rows, w.out});
    dev.convert(d, dy);
    return d;
}

// With a bias, the weight gradient's product also sums dy into the bias gradient
// (Device::gemm_epilogue's dbias): dy is read once for both. When both products run, dy is
// rounded once for them (round_dy_once).
void linear_bwd(Device& dev, const Tensor& dx, const LinearW& gw, const Tensor& dy_in,
                const Tensor& x, const LinearW& w, int64_t rows, bool accumulate_dx,
                const Tensor& dy16) {
    if (rows == 0) return;
    const Tensor dy = dx ? round_dy_once(dev, dy_in, dy16, w, rows) : dy_in;
    if (dx) dev.gemm(linear_dx_gemm(dx, dy, w, rows, accumulate_dx));
    if (gw.b)
        dev.gemm_epilogue(linear_dw_gemm(gw, dy, x, w, rows), GemmEpilogue{.dbias = gw.b});
    else
        dev.gemm(linear_dw_gemm(gw, dy, x, w, rows));
}

}  // namespace moetrain
