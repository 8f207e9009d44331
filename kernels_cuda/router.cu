// CudaDevice ops: the MoE routers (softmax top-k, hash) and the aux / z loss. Each turns its
// tensors into pointers and calls the launcher of router.cuh on the device stream (docs/CUDA.md).
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
// The router kernels compute the softmax top-k router without expert bias or routed scaling.
void check_router_args(const RouterArgs& r, bool has_bias) {
    MT_CHECK(!r.sigmoid, "cuda: moe.router \"sigmoid_topk\" is not supported yet");
    MT_CHECK(r.scaling == 1.0f, "cuda: moe.routed_scaling is not supported yet");
    MT_CHECK(!has_bias, "cuda: moe.bias_update_rate is not supported yet");
}
}  // namespace

void CudaDevice::router_fwd_impl(const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                                 const Tensor& topk_w, const Tensor& logits, const Tensor& bias,
                                 int64_t N, int64_t E, int64_t k, const RouterArgs& r) {
    const char* op = "router_fwd";
    check_router(op, E, k);
    check_router_args(r, bias.buf != nullptr);
    const bool norm_topk = r.norm_topk;
    mtk::router_fwd(stream(op), f32(probs), f32(lse), i32(topk_idx), f32(topk_w), f32(logits), N, E,
                    k, norm_topk);
    launched(op);
}

void CudaDevice::router_bwd_impl(const Tensor& dlogits, const Tensor& dtopk_w, const Tensor& probs,
                                 const Tensor& lse, const Tensor&, const Tensor& topk_idx,
                                 const Tensor& topk_w, const Tensor& counts, int64_t N, int64_t E,
                                 int64_t k, const RouterArgs& r, float aux_alpha, float z_alpha,
                                 float scale) {
    const char* op = "router_bwd";
    check_router(op, E, k);
    check_router_args(r, false);
    const bool norm_topk = r.norm_topk;
    const auto [dl, dw, p, l] = f32s(dlogits, dtopk_w, probs, lse);
    const int32_t* idx = i32(topk_idx);
    const float* w = f32(topk_w);
    const int32_t* c = i32(counts);
    mtk::router_bwd(stream(op), dl, dw, p, l, idx, w, c, N, E, k, norm_topk, aux_alpha, z_alpha,
                    scale, error_word());
    launched(op);
}

void CudaDevice::router_aux_loss_impl(const Tensor& out, const Tensor& probs, const Tensor& lse,
                                      const Tensor& counts, int64_t N, int64_t E, int64_t k,
                                      const RouterArgs& r, float aux_alpha, float z_alpha) {
    const char* op = "router_aux_loss";
    check_router(op, E, k);
    check_router_args(r, false);
    mtk::router_aux_loss(stream(op), f32(out), f32(probs), f32(lse), i32(counts), N, E, k,
                         aux_alpha, z_alpha);
    launched(op);
}

void CudaDevice::hash_route_impl(const Tensor& topk_idx, const Tensor& ids, int64_t N,
                                 int64_t layer, int64_t E) {
    MT_CHECK(E >= 1 && E <= INT_MAX, "hash_route: n_experts ", E, " outside 1..", INT_MAX);
    MT_CHECK(layer < INT_MAX, "hash_route: layer ", layer, " too large");
    mtk::hash_route(stream("hash_route"), i32(topk_idx), i32(ids), N, layer, E);
    launched("hash_route");
}

void CudaDevice::moe_capacity_impl(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                   int64_t, int64_t, int64_t, int64_t) {
    fail("cuda: moe.capacity_factor is not supported yet");
}

void CudaDevice::add_counts_impl(const Tensor&, const Tensor&, int64_t) {
    fail("cuda: moe.bias_update_rate is not supported yet");
}

void CudaDevice::expert_bias_update_impl(const Tensor&, const Tensor&, int64_t, double) {
    fail("cuda: moe.bias_update_rate is not supported yet");
}

}  // namespace moetrain::cuda
