// CudaDevice ops: the MoE routers (softmax / sigmoid top-k with expert bias and routed scaling,
// hash) and the aux / z loss. Each turns its tensors into pointers and calls the launcher of
// router.cuh on the device stream (docs/CUDA.md).
#include <climits>

#include "router.cuh"

#include "cuda/cuda_device.h"

namespace moetrain::cuda {

namespace {
void check_router(const char* op, int64_t E, int64_t k) {
    MT_CHECK(k <= mtk::kMaxTopK, op, ": top_k ", k, " > ", mtk::kMaxTopK,
             " (the CUDA router kernels' limit)");
    MT_CHECK(E <= INT_MAX, op, ": n_experts ", E, " too large");
}
// The router options of one call as the kernels take them (bias: nullptr for none).
mtk::RouterOpts router_opts(const RouterArgs& r, const float* bias) {
    return {r.sigmoid, r.norm_topk, r.scaling, bias};
}
}  // namespace

void CudaDevice::router_fwd_impl(const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                                 const Tensor& topk_w, const Tensor& logits, const Tensor& bias,
                                 int64_t N, int64_t E, int64_t k, const RouterArgs& r) {
    const char* op = "router_fwd";
    check_router(op, E, k);
    mtk::router_fwd(stream(op), f32(probs), f32(lse), i32(topk_idx), f32(topk_w), f32(logits), N, E,
                    k, router_opts(r, f32(bias)));
    launched(op);
}

void CudaDevice::router_bwd_impl(const Tensor& dlogits, const Tensor& dtopk_w, const Tensor& probs,
                                 const Tensor& lse, const Tensor& logits, const Tensor& topk_idx,
                                 const Tensor& topk_w, const Tensor& counts, int64_t N, int64_t E,
                                 int64_t k, const RouterArgs& r, float aux_alpha, float z_alpha,
                                 float scale) {
    const char* op = "router_bwd";
    check_router(op, E, k);
    const auto [dl, dw, p, l] = f32s(dlogits, dtopk_w, probs, lse);
    const int32_t* idx = i32(topk_idx);
    const float* w = f32(topk_w);
    const int32_t* c = i32(counts);
    mtk::router_bwd(stream(op), dl, dw, p, l, f32(logits), idx, w, c, N, E, k,
                    router_opts(r, nullptr), aux_alpha, z_alpha, scale, error_word());
    launched(op);
}

void CudaDevice::router_aux_loss_impl(const Tensor& out, const Tensor& probs, const Tensor& lse,
                                      const Tensor& counts, int64_t N, int64_t E, int64_t k,
                                      const RouterArgs& r, float aux_alpha, float z_alpha) {
    const char* op = "router_aux_loss";
    check_router(op, E, k);
    auto* tmp = static_cast<float*>(scratch(mtk::aux_scratch_bytes(N)));
    mtk::router_aux_loss(stream(op), f32(out), f32(probs), f32(lse), i32(counts), N, E, k,
                         r.sigmoid, aux_alpha, z_alpha, tmp);
    launched(op);
}

void CudaDevice::hash_route_impl(const Tensor& topk_idx, const Tensor& ids, int64_t N,
                                 int64_t layer, int64_t E) {
    MT_CHECK(E >= 1 && E <= INT_MAX, "hash_route: n_experts ", E, " outside 1..", INT_MAX);
    MT_CHECK(layer < INT_MAX, "hash_route: layer ", layer, " too large");
    mtk::hash_route(stream("hash_route"), i32(topk_idx), i32(ids), N, layer, E);
    launched("hash_route");
}

}  // namespace moetrain::cuda
