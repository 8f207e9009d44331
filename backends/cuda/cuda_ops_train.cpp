// CUDA ops: MoE routing and token permutation, the cross-entropy loss, reductions, optimizer
// updates and sampling. Each op checks its tensors, calls the kernel launcher of
// kernels_cuda/ops.h on the device stream (with scratch from the context) and checks the launch.
#include <algorithm>
#include <climits>
#include <cmath>

#include "cuda/cub_scan.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_errors.h"
#include "launch.h"
#include "shared/mt_qmap_table.h"

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
    mtk::router_fwd(stream(op), f32(probs), f32(lse), i32(topk_idx), f32(topk_w), f32(logits), N, E,
                    k, r.norm_topk);
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
    const auto [dl, dw, p, l] = f32s(dlogits, dtopk_w, probs, lse);
    const int32_t* idx = i32(topk_idx);
    const float* w = f32(topk_w);
    const int32_t* c = i32(counts);
    mtk::router_bwd(stream(op), dl, dw, p, l, idx, w, c, N, E, k, r.norm_topk, aux_alpha, z_alpha,
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

void CudaDevice::moe_sort_impl(const Tensor& counts, const Tensor& row_token,
                               const Tensor& slot_row, const Tensor& topk_idx, int64_t N, int64_t k,
                               int64_t E) {
    const char* op = "moe_sort";
    MT_CHECK(E <= mtk::kMaxExperts, op, ": n_experts ", E, " > ", mtk::kMaxExperts,
             " (the CUDA sort kernels' limit)");
    MT_CHECK(N * k <= INT_MAX, op, ": ", N * k, " slots exceed int32 row indices");
    int32_t* c = i32(counts);
    int32_t* rt = i32(row_token);
    int32_t* sr = i32(slot_row);
    const int32_t* idx = i32(topk_idx);
    const mtk::Stream st = stream(op);  // this device current before cub sizes its temp storage
    const mtk::ExclusiveScan scan = exclusive_sum_i32_scan();  // cub, cub_scan.h
    const size_t scan_temp = scan.temp_bytes(mtk::moe_sort_scan_items(N * k, E));
    void* scratch = context().scratch(mtk::moe_sort_scratch_bytes(N * k, E, scan_temp));
    mtk::moe_sort(st, c, rt, sr, idx, N, k, E, scan, scan_temp, scratch, error_word());
    launched(op);  // a bad expert index is reported at the next download() / synchronize()
}

void CudaDevice::gather_rows_impl(const Tensor& dst, const Tensor& src, const Tensor& index,
                                  int64_t R, int64_t dim) {
    const char* op = "gather_rows";
    const float* s = f32(src);
    mtk::gather_rows(stream(op), f32(dst), s, dim > 0 ? src.numel() / dim : 0, i32(index), R, dim,
                     error_word());
    launched(op);
}

void CudaDevice::moe_combine_impl(const Tensor& y, const Tensor& rows, const Tensor& slot_row,
                                  const Tensor& w, int64_t N, int64_t k, int64_t dim,
                                  bool accumulate) {
    const char* op = "moe_combine";
    const float* r = f32(rows);
    const int64_t nrows = dim > 0 && r ? rows.numel() / dim : 0;
    mtk::moe_combine(stream(op), f32(y), r, nrows, i32(slot_row), f32(w), N, k, dim, accumulate,
                     error_word());
    launched(op);
}

void CudaDevice::moe_combine_bwd_impl(const Tensor& drows, const Tensor& dw, const Tensor& dy,
                                      const Tensor& rows, const Tensor& slot_row, const Tensor& w,
                                      int64_t N, int64_t k, int64_t dim) {
    const char* op = "moe_combine_bwd";
    const auto [pdr, pdw, pdy, pr] = f32s(drows, dw, dy, rows);
    const int32_t* ps = i32(slot_row);
    const float* pw = f32(w);
    const int64_t nrows = dim > 0 && pr ? std::min(drows.numel(), rows.numel()) / dim : 0;
    mtk::moe_combine_bwd(stream(op), pdr, pdw, pdy, pr, nrows, ps, pw, N, k, dim, error_word());
    launched(op);
}

void CudaDevice::cross_entropy_impl(const Tensor& losses, const Tensor& logits,
                                    const Tensor& targets, int64_t N, int64_t V, float grad_scale) {
    const char* op = "cross_entropy";
    mtk::cross_entropy(stream(op), f32(losses), f32(logits), i32(targets), N, V, grad_scale,
                       error_word());
    launched(op);
    check_device_error();  // a bad target must fail here, not at a later download
}

void CudaDevice::sum_impl(const Tensor& out, const Tensor& x, int64_t n, float scale,
                          bool accumulate) {
    float* o = f32(out);
    const float* px = f32(x);
    auto* scratch = static_cast<float*>(context().scratch(mtk::reduce_scratch_bytes(n)));
    mtk::sum(stream("sum"), o, px, n, scale, accumulate, scratch);
    launched("sum");
}

void CudaDevice::sum_squares_impl(const Tensor& out, const Tensor& x, int64_t n, bool accumulate) {
    float* o = f32(out);
    const float* px = f32(x);
    auto* scratch = static_cast<float*>(context().scratch(mtk::reduce_scratch_bytes(n)));
    mtk::sum_squares(stream("sum_squares"), o, px, n, accumulate, scratch);
    launched("sum_squares");
}

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
    auto* table = static_cast<float*>(context().scratch(MT_QMAP_LEN * sizeof(float)));
    mtk::Stream s = stream(op);
    check_cuda(cudaMemcpyAsync(table, qmap_host_table(), MT_QMAP_LEN * sizeof(float),
                               cudaMemcpyHostToDevice, s),
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

void CudaDevice::sample_impl(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                             const SampleArgs& s) {
    const char* op = "sample";
    MT_CHECK(V <= INT_MAX, op, ": vocabulary size ", V, " outside 1..", INT_MAX);
    int32_t* ids = i32(out_ids);
    const float* l = f32(logits);
    auto* scratch = static_cast<uint64_t*>(context().scratch(mtk::sample_scratch_bytes(B, V)));
    mtk::SampleParams p{s.temperature, s.top_k, s.top_p, s.seed, s.step, device_value(s.step_dev)};
    mtk::sample(stream(op), ids, l, B, V, p, scratch);
    launched(op);
}

}  // namespace moetrain::cuda
