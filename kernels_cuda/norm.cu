// CudaDevice ops: RMSNorm and LayerNorm, forward and backward. Each turns its tensors into pointers
// and calls the launcher of norm.cuh on the device stream (docs/CUDA.md).
#include "norm.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

void CudaDevice::rmsnorm_fwd_impl(const Tensor& y, const Tensor& rstd, const Tensor& x,
                                  const Tensor& g, int64_t rows, int64_t dim, float eps) {
    const char* op = "rmsnorm_fwd";
    mtk::rmsnorm_fwd(stream(op), raw(y), f32(rstd), f32(x), f32(g), rows, dim, eps,
                     float_kind(y.dtype));
    launched(op);
}

void CudaDevice::rmsnorm_bwd_impl(const Tensor& dx, const Tensor& dg, const Tensor& dy,
                                  const Tensor& x, const Tensor& g, const Tensor& rstd,
                                  int64_t rows, int64_t dim, bool accumulate_dx) {
    const char* op = "rmsnorm_bwd";
    const auto [pdx, pdg, pdy, px, pg, pr] = f32s(dx, dg, dy, x, g, rstd);
    auto* tmp = static_cast<float*>(scratch(mtk::norm_bwd_scratch_bytes(rows, dim)));
    mtk::rmsnorm_bwd(stream(op), pdx, pdg, pdy, px, pg, pr, rows, dim, accumulate_dx, tmp);
    launched(op);
}

void CudaDevice::layernorm_fwd_impl(const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& x, const Tensor& g, const Tensor& b, int64_t rows,
                                    int64_t dim, float eps) {
    const char* op = "layernorm_fwd";
    mtk::layernorm_fwd(stream(op), raw(y), f32(mean), f32(rstd), f32(x), f32(g), f32(b), rows, dim,
                       eps, float_kind(y.dtype));
    launched(op);
}

void CudaDevice::layernorm_bwd_impl(const Tensor& dx, const Tensor& dg, const Tensor& db,
                                    const Tensor& dy, const Tensor& x, const Tensor& g,
                                    const Tensor& mean, const Tensor& rstd, int64_t rows,
                                    int64_t dim, bool accumulate_dx) {
    const char* op = "layernorm_bwd";
    const auto [pdx, pdg, pdb, pdy, px, pg, pm, pr] = f32s(dx, dg, db, dy, x, g, mean, rstd);
    auto* tmp = static_cast<float*>(scratch(mtk::norm_bwd_scratch_bytes(rows, dim)));
    mtk::layernorm_bwd(stream(op), pdx, pdg, pdb, pdy, px, pg, pm, pr, rows, dim, accumulate_dx,
                       tmp);
    launched(op);
}

}  // namespace moetrain::cuda
