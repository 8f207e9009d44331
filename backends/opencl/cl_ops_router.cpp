// MoE router ops: softmax / sigmoid top-k forward/backward, aux/z loss terms, hash routing
// (kernels_cl/router.cl).
#include "cl_device.h"

namespace moetrain::opencl {
namespace {

// The backend's expert count limit (the routing sizes are checked by the front door).
void check_router(int64_t E, const char* op) {
    MT_CHECK(E < (int64_t{1} << 24), op, ": n_experts ", E, " out of range");
}

}  // namespace

void ClDevice::router_fwd_impl(const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                               const Tensor& topk_w, const Tensor& logits, const Tensor& bias,
                               int64_t N, int64_t E, int64_t k, const RouterArgs& r) {
    check_router(E, "router_fwd");
    if (N == 0) return;
    launch("router", "mt_router_fwd", items(N, 64), arg(probs), arg(lse), arg(topk_idx),
           arg(topk_w), arg(logits), arg(bias), cl_int{!bias.empty()}, cl_long{N},
           static_cast<cl_int>(E), static_cast<cl_int>(k), cl_int{r.norm_topk}, cl_int{r.sigmoid},
           r.scaling);
}

void ClDevice::router_bwd_impl(const Tensor& dlogits, const Tensor& dtopk_w, const Tensor& probs,
                               const Tensor& lse, const Tensor& logits, const Tensor& topk_idx,
                               const Tensor& topk_w, const Tensor& counts, int64_t N, int64_t E,
                               int64_t k, const RouterArgs& r, float aux_alpha, float z_alpha,
                               float scale) {
    check_router(E, "router_bwd");
    if (N == 0) return;
    launch("router", "mt_router_bwd", items(N, 64), arg(dlogits), arg(dtopk_w), arg(probs),
           arg(lse), arg(logits), arg(topk_idx), arg(topk_w), arg(counts), cl_long{N},
           static_cast<cl_int>(E), static_cast<cl_int>(k), cl_int{r.norm_topk}, cl_int{r.sigmoid},
           r.scaling, aux_alpha, z_alpha, scale, error_word());
}

void ClDevice::router_aux_loss_impl(const Tensor& out, const Tensor& probs, const Tensor& lse,
                                    const Tensor& counts, int64_t N, int64_t E, int64_t k,
                                    const RouterArgs& r, float aux_alpha, float z_alpha) {
    check_router(E, "router_aux_loss");
    DevPtr pout = arg(out);
    if (N == 0) return;
    launch("router", "mt_router_aux_loss", reduce_groups(1), pout, arg(probs), arg(lse),
           arg(counts), cl_long{N}, static_cast<cl_int>(E), static_cast<cl_int>(k),
           cl_int{r.sigmoid}, aux_alpha, z_alpha);
}

void ClDevice::hash_route_impl(const Tensor& topk_idx, const Tensor& ids, int64_t N, int64_t layer,
                               int64_t E) {
    MT_CHECK(E > 0 && E < (int64_t{1} << 31), "hash_route: n_experts ", E, " out of range");
    MT_CHECK(layer >= 0 && layer < (int64_t{1} << 31), "hash_route: bad layer ", layer);
    if (N == 0) return;
    launch("router", "mt_hash_route", items(N), arg(topk_idx), arg(ids), cl_long{N},
           static_cast<cl_int>(layer), static_cast<cl_int>(E));
}

}  // namespace moetrain::opencl
