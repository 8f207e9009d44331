// CudaDevice ops: AdamW, 8-bit AdamW and SGD. Each turns its tensors into pointers and calls the
// launcher of optimizer.cuh on the device stream (docs/CUDA.md).
#include "optimizer.cuh"

#include "cuda/cuda_device.h"
#include "shared/mt_qmap_table.h"

namespace moetrain::cuda {

void CudaDevice::adamw_impl(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                            int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                            float grad_scale) {
    const char* op = "adamw";
    mtk::AdamWParams k{a.lr, a.b1, a.b2, a.eps, a.wd, a.bc1, a.bc2};
    mtk::adamw(stream(op), f32(p), f32(g), f32(m), f32(v), n, k, f32(gnorm_sq), clip, grad_scale);
    launched(op);
}

void CudaDevice::adamw8bit_impl(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                                const Tensor& v_codes, const Tensor& m_absmax,
                                const Tensor& v_absmax, int64_t n, const AdamWArgs& a,
                                const Tensor& gnorm_sq, float clip, float grad_scale) {
    const char* op = "adamw8bit";
    if (n == 0) return;
    float* pp = f32(p);
    const float* pg = f32(g);
    auto* mc = static_cast<uint8_t*>(raw(m_codes));
    auto* vc = static_cast<uint8_t*>(raw(v_codes));
    const auto [ma, va, norm] = f32s(m_absmax, v_absmax, gnorm_sq);
    // The maps go to scratch ahead of the kernel (stream order; the host table is static).
    auto* table = static_cast<float*>(scratch(MT_QMAP_LEN * sizeof(float)));
    mtk::Stream s = stream(op);
    upload_static(table, qmap_host_table(), MT_QMAP_LEN * sizeof(float),
                  "cudaMemcpyAsync (adamw8bit quantisation maps)");
    mtk::AdamWParams k{a.lr, a.b1, a.b2, a.eps, a.wd, a.bc1, a.bc2};
    mtk::adamw8bit(s, pp, pg, mc, vc, ma, va, table, n, k, norm, clip, grad_scale);
    launched(op);
}

void CudaDevice::sgd_impl(const Tensor& p, const Tensor& g, int64_t n, float lr,
                          const Tensor& gnorm_sq, float clip, float grad_scale) {
    mtk::sgd(stream("sgd"), f32(p), f32(g), n, lr, f32(gnorm_sq), clip, grad_scale);
    launched("sgd");
}

}  // namespace moetrain::cuda
