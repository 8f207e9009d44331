// MoE router ops: softmax top-k forward/backward, aux/z loss terms, hash routing
// (kernels_cl/router.cl).
#include "cl_device.h"

namespace moetrain::opencl {
namespace {

void check_router(int64_t E, int64_t k, const char* op) {
    MT_CHECK(E > 0 && E < (int64_t{1} << 24), op, ": n_experts ", E, " out of range");
    MT_CHECK(k > 0 && k <= E, op, ": top_k ", k, " must be in 1..", E);
}

}  // namespace

void ClDevice::router_fwd(const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                          const Tensor& topk_w, const Tensor& logits, int64_t N, int64_t E,
                          int64_t k, bool norm_topk) {
    check_router(E, k, "router_fwd");
    if (N == 0) return;
    launch("router", "mt_router_fwd", items(N, 64), arg(probs, N * E, "router_fwd: probs"),
           arg(lse, N, "router_fwd: lse"), arg(topk_idx, N * k, "router_fwd: topk_idx", DType::i32),
           arg(topk_w, N * k, "router_fwd: topk_w"), arg(logits, N * E, "router_fwd: logits"),
           cl_long{N}, static_cast<cl_int>(E), static_cast<cl_int>(k), cl_int{norm_topk});
}

void ClDevice::router_bwd(const Tensor& dlogits, const Tensor& dtopk_w, const Tensor& probs,
                          const Tensor& lse, const Tensor& topk_idx, const Tensor& topk_w,
                          const Tensor& counts, int64_t N, int64_t E, int64_t k, bool norm_topk,
                          float aux_alpha, float z_alpha, float scale) {
    check_router(E, k, "router_bwd");
    if (N == 0) return;
    MT_CHECK(aux_alpha == 0 || !counts.empty(), "router_bwd: the aux loss needs expert counts");
    launch("router", "mt_router_bwd", items(N, 64), arg(dlogits, N * E, "router_bwd: dlogits"),
           arg(dtopk_w, N * k, "router_bwd: dtopk_w"), arg(probs, N * E, "router_bwd: probs"),
           arg(lse, N, "router_bwd: lse"), arg(topk_idx, N * k, "router_bwd: topk_idx", DType::i32),
           arg(topk_w, N * k, "router_bwd: topk_w"),
           opt_arg(counts, E, "router_bwd: counts", DType::i32), cl_long{N},
           static_cast<cl_int>(E), static_cast<cl_int>(k), cl_int{norm_topk}, aux_alpha, z_alpha,
           scale, error_word());
}

void ClDevice::router_aux_loss(const Tensor& out, const Tensor& probs, const Tensor& lse,
                               const Tensor& counts, int64_t N, int64_t E, int64_t k,
                               float aux_alpha, float z_alpha) {
    check_router(E, k, "router_aux_loss");
    DevPtr pout = arg(out, 2, "router_aux_loss: out");
    if (N == 0) return;
    launch("router", "mt_router_aux_loss", reduce_groups(1), pout,
           arg(probs, N * E, "router_aux_loss: probs"), arg(lse, N, "router_aux_loss: lse"),
           arg(counts, E, "router_aux_loss: counts", DType::i32), cl_long{N},
           static_cast<cl_int>(E), static_cast<cl_int>(k), aux_alpha, z_alpha);
}

void ClDevice::hash_route(const Tensor& topk_idx, const Tensor& ids, int64_t N, int64_t layer,
                          int64_t E) {
    MT_CHECK(E > 0 && E < (int64_t{1} << 31), "hash_route: n_experts ", E, " out of range");
    MT_CHECK(layer >= 0 && layer < (int64_t{1} << 31), "hash_route: bad layer ", layer);
    if (N == 0) return;
    launch("router", "mt_hash_route", items(N), arg(topk_idx, N, "hash_route: topk_idx", DType::i32),
           arg(ids, N, "hash_route: ids", DType::i32), cl_long{N}, static_cast<cl_int>(layer),
           static_cast<cl_int>(E));
}

}  // namespace moetrain::opencl
