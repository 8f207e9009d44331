// ProfilingDevice: forwards every op to the wrapped device, synchronises, and books wall time,
// FLOPs and an estimate of the bytes each op reads and writes (f32 = 4 bytes). Attention's
// cost counts the device-side length too (AttnDims::tk_dev, downloaded: ops wait anyway).
#include "moetrain/profiling.h"

#include <algorithm>
#include <chrono>

namespace moetrain {
namespace {
constexpr double F = 4.0;  // bytes per f32 / i32 element
double d(int64_t v) { return static_cast<double>(v); }
}  // namespace

template <typename Fn>
void ProfilingDevice::timed(const char* op, double flops, double bytes, Fn&& fn) {
    inner_.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    fn();
    inner_.synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    OpProfile& p = table_[op];
    p.op = op;
    p.calls++;
    p.seconds += s;
    p.flops += flops;
    p.bytes += bytes;
}

int64_t ProfilingDevice::device_value(const Tensor& t) {
    int32_t v = 0;
    if (t.buf) inner_.download(&v, t.view(0, {1}));  // ops are synchronous here anyway
    return v;
}

std::vector<OpProfile> ProfilingDevice::table() const {
    std::vector<OpProfile> v;
    for (const auto& [k, p] : table_) v.push_back(p);
    std::sort(v.begin(), v.end(), [](const OpProfile& a, const OpProfile& b) {
        return a.seconds > b.seconds;
    });
    return v;
}

void ProfilingDevice::upload(const Tensor& dst, const void* src) {
    timed("upload", 0, d(dst.bytes()), [&] { inner_.upload(dst, src); });
}
void ProfilingDevice::download(void* dst, const Tensor& src) {
    timed("download", 0, d(src.bytes()), [&] { inner_.download(dst, src); });
}
void ProfilingDevice::copy(const Tensor& dst, const Tensor& src) {
    timed("copy", 0, 2.0 * d(dst.bytes()), [&] { inner_.copy(dst, src); });
}
void ProfilingDevice::fill(const Tensor& dst, float value) {
    timed("fill", 0, d(dst.bytes()), [&] { inner_.fill(dst, value); });
}
void ProfilingDevice::convert(const Tensor& dst, const Tensor& src) {
    timed("convert", 0, d(dst.bytes() + src.bytes()), [&] { inner_.convert(dst, src); });
}
void ProfilingDevice::gemm(const GemmArgs& g) {
    double flops = 2.0 * d(g.m) * d(g.n) * d(g.k) * d(g.batch);
    double bytes = F * d(g.batch) * (d(g.m * g.k) + d(g.k * g.n) + d(g.m * g.n) * (g.beta ? 2 : 1));
    timed("gemm", flops, bytes, [&] { inner_.gemm(g); });
}
// Counted at the capacity (the group sizes stay on the device): exact for a dropless MoE,
// whose groups fill it.
void ProfilingDevice::gemm_grouped(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                                   GroupDim dim) {
    const double flops = 2.0 * d(g.m) * d(g.n) * d(g.k);
    const double weights = d(groups) * d(dim == GroupDim::m ? g.k * g.n : g.m * g.n);
    const double rows = dim == GroupDim::m ? d(g.m) * d(g.k + g.n * (g.beta ? 2 : 1))
                                           : d(g.k) * d(g.m + g.n);
    const double bytes = F * (rows + weights * (dim == GroupDim::k && g.beta ? 2 : 1));
    timed("gemm_grouped", flops, bytes, [&] { inner_.gemm_grouped(g, group_rows, groups, dim); });
}
void ProfilingDevice::add(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) {
    timed("add", d(n), 3 * F * d(n), [&] { inner_.add(out, a, b, n); });
}
void ProfilingDevice::axpby(const Tensor& y, float alpha, const Tensor& x, float beta, int64_t n) {
    timed("axpby", 3 * d(n), 3 * F * d(n), [&] { inner_.axpby(y, alpha, x, beta, n); });
}
void ProfilingDevice::add_bias(const Tensor& y, const Tensor& bias, int64_t rows, int64_t cols) {
    timed("add_bias", d(rows * cols), 2 * F * d(rows * cols),
          [&] { inner_.add_bias(y, bias, rows, cols); });
}
void ProfilingDevice::bias_grad(const Tensor& dbias, const Tensor& dy, int64_t rows,
                                int64_t cols) {
    timed("bias_grad", d(rows * cols), F * d(rows * cols),
          [&] { inner_.bias_grad(dbias, dy, rows, cols); });
}
void ProfilingDevice::embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids,
                                    int64_t n, int64_t dim, bool accumulate) {
    timed("embedding_fwd", 0, F * d(n * dim) * (accumulate ? 3 : 2),
          [&] { inner_.embedding_fwd(out, table, ids, n, dim, accumulate); });
}
void ProfilingDevice::embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                    int64_t n, int64_t dim) {
    timed("embedding_bwd", d(n * dim), 3 * F * d(n * dim),
          [&] { inner_.embedding_bwd(dtable, dout, ids, n, dim); });
}
void ProfilingDevice::rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x,
                                  const Tensor& g, int64_t rows, int64_t dim, float eps) {
    timed("rmsnorm_fwd", 4 * d(rows * dim), 2 * F * d(rows * dim),
          [&] { inner_.rmsnorm_fwd(y, rstd, x, g, rows, dim, eps); });
}
void ProfilingDevice::rmsnorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& dy,
                                  const Tensor& x, const Tensor& g, const Tensor& rstd,
                                  int64_t rows, int64_t dim, bool accumulate_dx) {
    timed("rmsnorm_bwd", 8 * d(rows * dim), F * d(rows * dim) * (accumulate_dx ? 4 : 3),
          [&] { inner_.rmsnorm_bwd(dx, dg, dy, x, g, rstd, rows, dim, accumulate_dx); });
}
void ProfilingDevice::layernorm_fwd(const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& x, const Tensor& g, const Tensor& b,
                                    int64_t rows, int64_t dim, float eps) {
    timed("layernorm_fwd", 6 * d(rows * dim), 2 * F * d(rows * dim),
          [&] { inner_.layernorm_fwd(y, mean, rstd, x, g, b, rows, dim, eps); });
}
void ProfilingDevice::layernorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& db,
                                    const Tensor& dy, const Tensor& x, const Tensor& g,
                                    const Tensor& mean, const Tensor& rstd, int64_t rows,
                                    int64_t dim, bool accumulate_dx) {
    timed("layernorm_bwd", 10 * d(rows * dim), F * d(rows * dim) * (accumulate_dx ? 4 : 3), [&] {
        inner_.layernorm_bwd(dx, dg, db, dy, x, g, mean, rstd, rows, dim, accumulate_dx);
    });
}
void ProfilingDevice::rope(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd,
                           float theta, int64_t pos0, const Tensor& pos_dev, bool inverse) {
    double n = d(B * T * nh * hd);
    timed("rope", 3 * n, 2 * F * n,
          [&] { inner_.rope(x, B, T, nh, hd, theta, pos0, pos_dev, inverse); });
}
void ProfilingDevice::kv_append(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T,
                                int64_t S, int64_t row_len, int64_t pos0, const Tensor& pos_dev) {
    timed("kv_append", 0, 2.0 * d(B * T * row_len) * d(dtype_size(rows.dtype)),
          [&] { inner_.kv_append(cache, rows, B, T, S, row_len, pos0, pos_dev); });
}
void ProfilingDevice::attention_fwd(const Tensor& o, const Tensor& lse, const Tensor& q,
                                    const Tensor& k, const Tensor& v, const AttnDims& a,
                                    float scale) {
    // q.k and p.v over the causal half: 2 * 2 * B * H * Tq * Tk/2 * hd (Tq = Tk in training).
    const double Tk = d(a.Tk + device_value(a.tk_dev));
    double flops = 2.0 * d(a.B * a.H) * d(a.Tq) * Tk * d(a.hd);
    double bytes = F * d(a.B) * (2 * d(a.Tq * a.H * a.hd) + 2 * Tk * d(a.K * a.hd));
    timed("attention_fwd", flops, bytes, [&] { inner_.attention_fwd(o, lse, q, k, v, a, scale); });
}
void ProfilingDevice::attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                    const Tensor& dout, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor& o, const Tensor& lse,
                                    const AttnDims& a, float scale) {
    const double Tk = d(a.Tk + device_value(a.tk_dev));
    double flops = 5.0 * d(a.B * a.H) * d(a.Tq) * Tk * d(a.hd);  // recompute s + 4 products
    double bytes = F * d(a.B) * (4 * d(a.Tq * a.H * a.hd) + 4 * Tk * d(a.K * a.hd));
    timed("attention_bwd", flops, bytes,
          [&] { inner_.attention_bwd(dq, dk, dv, dout, q, k, v, o, lse, a, scale); });
}
void ProfilingDevice::act_fwd(Act act, const Tensor& y, const Tensor& x, int64_t n) {
    timed("act_fwd", 10 * d(n), 2 * F * d(n), [&] { inner_.act_fwd(act, y, x, n); });
}
void ProfilingDevice::act_bwd(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x,
                              int64_t n) {
    timed("act_bwd", 15 * d(n), 3 * F * d(n), [&] { inner_.act_bwd(act, dx, dy, x, n); });
}
void ProfilingDevice::swiglu_fwd(const Tensor& h, const Tensor& gate, const Tensor& up,
                                 int64_t n) {
    timed("swiglu_fwd", 6 * d(n), 3 * F * d(n), [&] { inner_.swiglu_fwd(h, gate, up, n); });
}
void ProfilingDevice::swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                                 const Tensor& gate, const Tensor& up, int64_t n) {
    timed("swiglu_bwd", 10 * d(n), 5 * F * d(n),
          [&] { inner_.swiglu_bwd(dgate, dup, dh, gate, up, n); });
}
void ProfilingDevice::softmax(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
    timed("softmax", 5 * d(rows * cols), 2 * F * d(rows * cols),
          [&] { inner_.softmax(y, x, rows, cols); });
}
void ProfilingDevice::router_fwd(const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                                 const Tensor& topk_w, const Tensor& logits, int64_t N, int64_t E,
                                 int64_t k, bool norm_topk) {
    timed("router_fwd", 5 * d(N * E), 2 * F * d(N * E),
          [&] { inner_.router_fwd(probs, lse, topk_idx, topk_w, logits, N, E, k, norm_topk); });
}
void ProfilingDevice::router_bwd(const Tensor& dlogits, const Tensor& dtopk_w,
                                 const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                                 const Tensor& topk_w, const Tensor& counts, int64_t N, int64_t E,
                                 int64_t k, bool norm_topk, float aux_alpha, float z_alpha,
                                 float scale) {
    timed("router_bwd", 6 * d(N * E), 2 * F * d(N * E), [&] {
        inner_.router_bwd(dlogits, dtopk_w, probs, lse, topk_idx, topk_w, counts, N, E, k,
                          norm_topk, aux_alpha, z_alpha, scale);
    });
}
void ProfilingDevice::router_aux_loss(const Tensor& out, const Tensor& probs, const Tensor& lse,
                                      const Tensor& counts, int64_t N, int64_t E, int64_t k,
                                      float aux_alpha, float z_alpha) {
    timed("router_aux_loss", 2 * d(N * E), F * d(N * E), [&] {
        inner_.router_aux_loss(out, probs, lse, counts, N, E, k, aux_alpha, z_alpha);
    });
}
void ProfilingDevice::hash_route(const Tensor& topk_idx, const Tensor& ids, int64_t N,
                                 int64_t layer, int64_t E) {
    timed("hash_route", 10 * d(N), 2 * F * d(N),
          [&] { inner_.hash_route(topk_idx, ids, N, layer, E); });
}
void ProfilingDevice::moe_sort(const Tensor& counts, const Tensor& row_token,
                               const Tensor& slot_row, const Tensor& topk_idx, int64_t N,
                               int64_t k, int64_t E) {
    timed("moe_sort", 0, 4 * F * d(N * k),
          [&] { inner_.moe_sort(counts, row_token, slot_row, topk_idx, N, k, E); });
}
void ProfilingDevice::gather_rows(const Tensor& dst, const Tensor& src, const Tensor& index,
                                  int64_t R, int64_t dim) {
    timed("gather_rows", 0, 2 * F * d(R * dim),
          [&] { inner_.gather_rows(dst, src, index, R, dim); });
}
void ProfilingDevice::moe_combine(const Tensor& y, const Tensor& rows, const Tensor& slot_row,
                                  const Tensor& w, int64_t N, int64_t k, int64_t dim,
                                  bool accumulate) {
    timed("moe_combine", 2 * d(N * k * dim), F * d(N * dim) * (d(k) + (accumulate ? 2 : 1)),
          [&] { inner_.moe_combine(y, rows, slot_row, w, N, k, dim, accumulate); });
}
void ProfilingDevice::moe_combine_bwd(const Tensor& drows, const Tensor& dw, const Tensor& dy,
                                      const Tensor& rows, const Tensor& slot_row, const Tensor& w,
                                      int64_t N, int64_t k, int64_t dim) {
    timed("moe_combine_bwd", 3 * d(N * k * dim), F * d(N * dim) * (2 * d(k) + 1),
          [&] { inner_.moe_combine_bwd(drows, dw, dy, rows, slot_row, w, N, k, dim); });
}
void ProfilingDevice::cross_entropy(const Tensor& losses, const Tensor& logits,
                                    const Tensor& targets, int64_t N, int64_t V,
                                    float grad_scale) {
    timed("cross_entropy", 5 * d(N * V), F * d(N * V) * (grad_scale != 0 ? 2 : 1),
          [&] { inner_.cross_entropy(losses, logits, targets, N, V, grad_scale); });
}
void ProfilingDevice::sum(const Tensor& out, const Tensor& x, int64_t n, float scale,
                          bool accumulate) {
    timed("sum", d(n), F * d(n), [&] { inner_.sum(out, x, n, scale, accumulate); });
}
void ProfilingDevice::sum_squares(const Tensor& out, const Tensor& x, int64_t n,
                                  bool accumulate) {
    timed("sum_squares", 2 * d(n), F * d(n), [&] { inner_.sum_squares(out, x, n, accumulate); });
}
void ProfilingDevice::adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                            int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                            float grad_scale) {
    timed("adamw", 15 * d(n), 7 * F * d(n),
          [&] { inner_.adamw(p, g, m, v, n, a, gnorm_sq, clip, grad_scale); });
}
void ProfilingDevice::adamw8bit(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                                const Tensor& v_codes, const Tensor& m_absmax,
                                const Tensor& v_absmax, int64_t n, const AdamWArgs& a,
                                const Tensor& gnorm_sq, float clip, float grad_scale) {
    // Per element: p read + written, g read, two code bytes read + written (absmax: 1/256).
    // FLOPs: the AdamW update, two dequantisations and two 8-step code searches.
    timed("adamw8bit", 40 * d(n), (3 * F + 4 + 4 * F / 256) * d(n), [&] {
        inner_.adamw8bit(p, g, m_codes, v_codes, m_absmax, v_absmax, n, a, gnorm_sq, clip,
                         grad_scale);
    });
}
void ProfilingDevice::sgd(const Tensor& p, const Tensor& g, int64_t n, float lr,
                          const Tensor& gnorm_sq, float clip, float grad_scale) {
    timed("sgd", 3 * d(n), 3 * F * d(n),
          [&] { inner_.sgd(p, g, n, lr, gnorm_sq, clip, grad_scale); });
}
void ProfilingDevice::sample(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                             const SampleArgs& s) {
    timed("sample", 5 * d(B * V), F * d(B * V), [&] { inner_.sample(out_ids, logits, B, V, s); });
}

}  // namespace moetrain
