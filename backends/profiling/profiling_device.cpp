// ProfilingDevice: forwards every op to the wrapped device, synchronises, and books wall time,
// FLOPs and an estimate of the bytes each op reads and writes (f32 = 4 bytes). The forwarding
// is generated from the op table (api/moetrain/device_ops.def); what is written here per op is
// its cost. Attention's cost counts the device-side length too (AttnDims::tk_dev, downloaded:
// ops wait anyway).
#include <algorithm>
#include <chrono>

#include "moetrain/profiling.h"

namespace moetrain {
namespace {
constexpr double F = 4.0;  // bytes per f32 / i32 element
double d(int64_t v) {
    return static_cast<double>(v);
}
}  // namespace

template <typename Fn>
void ProfilingDevice::timed(const char* op, Cost cost, Fn&& fn) {
    inner_.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    fn();
    inner_.synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    OpProfile& p = table_[op];
    p.op = op;
    p.calls++;
    p.seconds += s;
    p.flops += cost.flops;
    p.bytes += cost.bytes;
}

// Every op: its cost (from the arguments, before the op runs), then the op timed on the
// wrapped device.
#define MT_DEVICE_OP(name, params, args)                           \
    void ProfilingDevice::name##_impl params {                     \
        timed(#name, cost_##name args, [&] { inner_.name args; }); \
    }
#include "moetrain/device_ops.def"

int64_t ProfilingDevice::device_value(const Tensor& t) {
    int32_t v = 0;
    if (t.buf) inner_.download(&v, t.view(0, {1}));  // ops are synchronous here anyway
    return v;
}

std::vector<OpProfile> ProfilingDevice::table() const {
    std::vector<OpProfile> v;
    v.reserve(table_.size());
    for (const auto& [k, p] : table_) v.push_back(p);
    std::sort(v.begin(), v.end(),
              [](const OpProfile& a, const OpProfile& b) { return a.seconds > b.seconds; });
    return v;
}

ProfilingDevice::Cost ProfilingDevice::cost_upload(const Tensor& dst, const void*) {
    return {0, d(dst.bytes())};
}
ProfilingDevice::Cost ProfilingDevice::cost_download(void*, const Tensor& src) {
    return {0, d(src.bytes())};
}
ProfilingDevice::Cost ProfilingDevice::cost_copy(const Tensor& dst, const Tensor&) {
    return {0, 2.0 * d(dst.bytes())};
}
ProfilingDevice::Cost ProfilingDevice::cost_fill(const Tensor& dst, float) {
    return {0, d(dst.bytes())};
}
ProfilingDevice::Cost ProfilingDevice::cost_convert(const Tensor& dst, const Tensor& src) {
    return {0, d(dst.bytes() + src.bytes())};
}
ProfilingDevice::Cost ProfilingDevice::cost_gemm(const GemmArgs& g) {
    double flops = 2.0 * d(g.m) * d(g.n) * d(g.k) * d(g.batch);
    double bytes = F * d(g.batch) * (d(g.m * g.k) + d(g.k * g.n) + d(g.m * g.n) * (g.beta ? 2 : 1));
    return {flops, bytes};
}
// Counted at the capacity (the group sizes stay on the device): exact for a dropless MoE,
// whose groups fill it.
ProfilingDevice::Cost ProfilingDevice::cost_gemm_grouped(const GemmArgs& g, const Tensor&,
                                                         int64_t groups, GroupDim dim) {
    const double flops = 2.0 * d(g.m) * d(g.n) * d(g.k);
    const double weights = d(groups) * d(dim == GroupDim::m ? g.k * g.n : g.m * g.n);
    const double rows =
        dim == GroupDim::m ? d(g.m) * d(g.k + g.n * (g.beta ? 2 : 1)) : d(g.k) * d(g.m + g.n);
    const double bytes = F * (rows + weights * (dim == GroupDim::k && g.beta ? 2 : 1));
    return {flops, bytes};
}
ProfilingDevice::Cost ProfilingDevice::cost_add(const Tensor&, const Tensor&, const Tensor&,
                                                int64_t n) {
    return {d(n), 3 * F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_axpby(const Tensor&, float, const Tensor&, float,
                                                  int64_t n) {
    return {3 * d(n), 3 * F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_add_bias(const Tensor&, const Tensor&, int64_t rows,
                                                     int64_t cols) {
    return {d(rows * cols), 2 * F * d(rows * cols)};
}
ProfilingDevice::Cost ProfilingDevice::cost_bias_grad(const Tensor&, const Tensor&, int64_t rows,
                                                      int64_t cols) {
    return {d(rows * cols), F * d(rows * cols)};
}
ProfilingDevice::Cost ProfilingDevice::cost_embedding_fwd(const Tensor&, const Tensor&,
                                                          const Tensor&, int64_t n, int64_t dim,
                                                          bool accumulate) {
    return {0, F * d(n * dim) * (accumulate ? 3 : 2)};
}
ProfilingDevice::Cost ProfilingDevice::cost_embedding_bwd(const Tensor&, const Tensor&,
                                                          const Tensor&, int64_t n, int64_t dim) {
    return {d(n * dim), 3 * F * d(n * dim)};
}
ProfilingDevice::Cost ProfilingDevice::cost_rmsnorm_fwd(const Tensor&, const Tensor&, const Tensor&,
                                                        const Tensor&, int64_t rows, int64_t dim,
                                                        float) {
    return {4 * d(rows * dim), 2 * F * d(rows * dim)};
}
ProfilingDevice::Cost ProfilingDevice::cost_rmsnorm_bwd(const Tensor&, const Tensor&, const Tensor&,
                                                        const Tensor&, const Tensor&, const Tensor&,
                                                        int64_t rows, int64_t dim,
                                                        bool accumulate_dx) {
    return {8 * d(rows * dim), F * d(rows * dim) * (accumulate_dx ? 4 : 3)};
}
ProfilingDevice::Cost ProfilingDevice::cost_layernorm_fwd(const Tensor&, const Tensor&,
                                                          const Tensor&, const Tensor&,
                                                          const Tensor&, const Tensor&,
                                                          int64_t rows, int64_t dim, float) {
    return {6 * d(rows * dim), 2 * F * d(rows * dim)};
}
ProfilingDevice::Cost ProfilingDevice::cost_layernorm_bwd(
    const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
    const Tensor&, const Tensor&, int64_t rows, int64_t dim, bool accumulate_dx) {
    return {10 * d(rows * dim), F * d(rows * dim) * (accumulate_dx ? 4 : 3)};
}
ProfilingDevice::Cost ProfilingDevice::cost_rope(const Tensor&, int64_t B, int64_t T, int64_t nh,
                                                 int64_t hd, float, int64_t, const Tensor&, bool) {
    double n = d(B * T * nh * hd);
    return {3 * n, 2 * F * n};
}
ProfilingDevice::Cost ProfilingDevice::cost_kv_append(const Tensor&, const Tensor& rows, int64_t B,
                                                      int64_t T, int64_t, int64_t row_len, int64_t,
                                                      const Tensor&) {
    return {0, 2.0 * d(B * T * row_len) * d(dtype_size(rows.dtype))};
}
ProfilingDevice::Cost ProfilingDevice::cost_attention_fwd(const Tensor&, const Tensor&,
                                                          const Tensor&, const Tensor&,
                                                          const Tensor&, const AttnDims& a, float) {
    // q.k and p.v over the causal half: 2 * 2 * B * H * Tq * Tk/2 * hd (Tq = Tk in training).
    const double Tk = d(a.Tk + device_value(a.tk_dev));
    double flops = 2.0 * d(a.B * a.H) * d(a.Tq) * Tk * d(a.hd);
    double bytes = F * d(a.B) * (2 * d(a.Tq * a.H * a.hd) + 2 * Tk * d(a.K * a.hd));
    return {flops, bytes};
}
ProfilingDevice::Cost ProfilingDevice::cost_attention_bwd(const Tensor&, const Tensor&,
                                                          const Tensor&, const Tensor&,
                                                          const Tensor&, const Tensor&,
                                                          const Tensor&, const Tensor&,
                                                          const Tensor&, const AttnDims& a, float) {
    const double Tk = d(a.Tk + device_value(a.tk_dev));
    double flops = 5.0 * d(a.B * a.H) * d(a.Tq) * Tk * d(a.hd);  // recompute s + 4 products
    double bytes = F * d(a.B) * (4 * d(a.Tq * a.H * a.hd) + 4 * Tk * d(a.K * a.hd));
    return {flops, bytes};
}
ProfilingDevice::Cost ProfilingDevice::cost_act_fwd(Act, const Tensor&, const Tensor&, int64_t n) {
    return {10 * d(n), 2 * F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_act_bwd(Act, const Tensor&, const Tensor&,
                                                    const Tensor&, int64_t n) {
    return {15 * d(n), 3 * F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_swiglu_fwd(const Tensor&, const Tensor&, const Tensor&,
                                                       int64_t n) {
    return {6 * d(n), 3 * F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_swiglu_bwd(const Tensor&, const Tensor&, const Tensor&,
                                                       const Tensor&, const Tensor&, int64_t n) {
    return {10 * d(n), 5 * F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_softmax(const Tensor&, const Tensor&, int64_t rows,
                                                    int64_t cols) {
    return {5 * d(rows * cols), 2 * F * d(rows * cols)};
}
ProfilingDevice::Cost ProfilingDevice::cost_router_fwd(const Tensor&, const Tensor&, const Tensor&,
                                                       const Tensor&, const Tensor&, const Tensor&,
                                                       int64_t N, int64_t E, int64_t,
                                                       const RouterArgs&) {
    return {5 * d(N * E), 2 * F * d(N * E)};
}
ProfilingDevice::Cost ProfilingDevice::cost_router_bwd(const Tensor&, const Tensor&, const Tensor&,
                                                       const Tensor&, const Tensor&, const Tensor&,
                                                       const Tensor&, const Tensor&, int64_t N,
                                                       int64_t E, int64_t, const RouterArgs&, float,
                                                       float, float) {
    return {6 * d(N * E), 3 * F * d(N * E)};
}
ProfilingDevice::Cost ProfilingDevice::cost_router_aux_loss(const Tensor&, const Tensor&,
                                                            const Tensor&, const Tensor&, int64_t N,
                                                            int64_t E, int64_t, const RouterArgs&,
                                                            float, float) {
    return {2 * d(N * E), F * d(N * E)};
}
ProfilingDevice::Cost ProfilingDevice::cost_hash_route(const Tensor&, const Tensor&, int64_t N,
                                                       int64_t, int64_t) {
    return {10 * d(N), 2 * F * d(N)};
}
ProfilingDevice::Cost ProfilingDevice::cost_moe_capacity(const Tensor&, const Tensor&,
                                                         const Tensor&, const Tensor&, int64_t N,
                                                         int64_t k, int64_t, int64_t) {
    return {0, 3 * F * d(N * k)};
}
ProfilingDevice::Cost ProfilingDevice::cost_moe_capacity_shares(const Tensor&, const Tensor&,
                                                                int64_t N, int64_t k, int64_t E,
                                                                int64_t, int64_t ranks) {
    return {0, F * d(N * k) + F * d(ranks * k * E)};
}
ProfilingDevice::Cost ProfilingDevice::cost_moe_sort(const Tensor&, const Tensor&, const Tensor&,
                                                     const Tensor&, int64_t N, int64_t k, int64_t) {
    return {0, 4 * F * d(N * k)};
}
ProfilingDevice::Cost ProfilingDevice::cost_gather_rows(const Tensor&, const Tensor&, const Tensor&,
                                                        int64_t R, int64_t dim) {
    return {0, 2 * F * d(R * dim)};
}
ProfilingDevice::Cost ProfilingDevice::cost_moe_combine(const Tensor&, const Tensor&, const Tensor&,
                                                        const Tensor&, int64_t N, int64_t k,
                                                        int64_t dim, bool accumulate) {
    return {2 * d(N * k * dim), F * d(N * dim) * (d(k) + (accumulate ? 2 : 1))};
}
ProfilingDevice::Cost ProfilingDevice::cost_moe_combine_bwd(const Tensor&, const Tensor&,
                                                            const Tensor&, const Tensor&,
                                                            const Tensor&, const Tensor&, int64_t N,
                                                            int64_t k, int64_t dim) {
    return {3 * d(N * k * dim), F * d(N * dim) * (2 * d(k) + 1)};
}
ProfilingDevice::Cost ProfilingDevice::cost_add_counts(const Tensor&, const Tensor&, int64_t n) {
    return {d(n), 3 * F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_expert_bias_update(const Tensor&, const Tensor&,
                                                               int64_t E, double) {
    return {3 * d(E), 3 * F * d(E)};
}
ProfilingDevice::Cost ProfilingDevice::cost_cross_entropy(const Tensor&, const Tensor&,
                                                          const Tensor&, int64_t N, int64_t V,
                                                          float grad_scale) {
    return {5 * d(N * V), F * d(N * V) * (grad_scale != 0 ? 2 : 1)};
}
ProfilingDevice::Cost ProfilingDevice::cost_sum(const Tensor&, const Tensor&, int64_t n, float,
                                                bool) {
    return {d(n), F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_sum_squares(const Tensor&, const Tensor&, int64_t n,
                                                        bool) {
    return {2 * d(n), F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_adamw(const Tensor&, const Tensor&, const Tensor&,
                                                  const Tensor&, int64_t n, const AdamWArgs&,
                                                  const Tensor&, float, float) {
    return {15 * d(n), 7 * F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_adamw8bit(const Tensor&, const Tensor&, const Tensor&,
                                                      const Tensor&, const Tensor&, const Tensor&,
                                                      int64_t n, const AdamWArgs&, const Tensor&,
                                                      float, float) {
    // Per element: p read + written, g read, two code bytes read + written (absmax: 1/256).
    // FLOPs: the AdamW update, two dequantisations and two 8-step code searches.
    return {40 * d(n), (3 * F + 4 + 4 * F / 256) * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_sgd(const Tensor&, const Tensor&, int64_t n, float,
                                                const Tensor&, float, float) {
    return {3 * d(n), 3 * F * d(n)};
}
ProfilingDevice::Cost ProfilingDevice::cost_sample(const Tensor&, const Tensor&, int64_t B,
                                                   int64_t V, const SampleArgs&) {
    return {5 * d(B * V), F * d(B * V)};
}

}  // namespace moetrain
