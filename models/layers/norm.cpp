// RMSNorm / LayerNorm layers (MODEL.md 2), forward and backward, over rows of d_model. A
// 16-bit output (mixed-precision storage, workspace.h) is written by the norm op itself, rounded
// from its f32 value; the backward reads only x and the statistics.
#include "layers/layers.h"

namespace moetrain {

void norm_fwd(Device& dev, const ModelConfig& c, const NormW& w, const Tensor& x, const NormActs& a,
              int64_t rows) {
    const float eps = static_cast<float>(c.norm_eps);
    const Tensor y = a.y.view(0, {rows, c.d_model});
    if (c.norm == NormKind::rmsnorm)
        dev.rmsnorm_fwd(y, a.rstd, x, w.g, rows, c.d_model, eps);
    else
        dev.layernorm_fwd(y, a.mean, a.rstd, x, w.g, w.b, rows, c.d_model, eps);
}

void norm_bwd(Device& dev, const ModelConfig& c, const NormW& w, const NormW& gw, const Tensor& dy,
              const Tensor& x, const NormActs& a, const Tensor& dx, int64_t rows,
              bool accumulate_dx) {
    if (c.norm == NormKind::rmsnorm)
        dev.rmsnorm_bwd(dx, gw.g, dy, x, w.g, a.rstd, rows, c.d_model, accumulate_dx);
    else
        dev.layernorm_bwd(dx, gw.g, gw.b, dy, x, w.g, a.mean, a.rstd, rows, c.d_model,
                          accumulate_dx);
}

}  // namespace moetrain
