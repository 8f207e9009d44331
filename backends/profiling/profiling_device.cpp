// ProfilingDevice: forwards every op to the wrapped device, synchronises, and books wall time,
// FLOPs and an estimate of the bytes each op reads and writes (f32 = 4 bytes). The forwarding
// is generated from the op table (api/moetrain/device_ops.def). An op's cost is its formula
// below when it has one; an op without one (a new op, or one the default describes exactly)
// is booked with 0 FLOPs and the bytes of its tensor arguments' views (each read or written
// once), so adding an op needs no edit here. Formulas exist where FLOPs matter or the default
// would miscount the bytes (a view larger than the elements touched, a read-modify-write).
// Attention's cost counts the device-side length too (AttnDims::tk_dev, downloaded: ops wait
// anyway).
#include <algorithm>
#include <chrono>
#include <string>
#include <type_traits>

#include "moetrain/profiling.h"

namespace moetrain {
namespace {
constexpr double F = 4.0;  // bytes per f32 / i32 element
// Bytes per element of an output stored in its own dtype (f32 / bf16 / f16).
double bytes_of(const Tensor& t) {
    return static_cast<double>(dtype_size(t.dtype));
}
double d(int64_t v) {
    return static_cast<double>(v);
}

struct Cost {
    double flops = 0, bytes = 0;
};

// One tag type per row of the op table: a formula names the op it costs by its tag.
enum class OpId {
#define MT_DEVICE_OP(name, params, args, ...) name,
#include "moetrain/device_ops.def"
};
template <OpId>
struct Op {};

// t[0] of a device-side value argument (device.h), 0 when t is empty.
int64_t device_value(Device& inner, const Tensor& t) {
    int32_t v = 0;
    if (t.buf) inner.download(&v, t.view(0, {1}));  // ops are synchronous here anyway
    return v;
}

// The default cost's share of one argument: the bytes of a non-empty tensor view, else 0.
double view_bytes(const Tensor& t) {
    return t.buf ? d(static_cast<int64_t>(t.bytes())) : 0.0;
}
template <typename T>
double view_bytes(const T&) {
    return 0.0;
}

// ---- the formulas ----

Cost formula(Op<OpId::copy>, Device&, const Tensor& dst, const Tensor&) {
    return {0, 2.0 * d(dst.bytes())};
}
Cost formula(Op<OpId::gemm>, Device&, const GemmArgs& g) {
    double flops = 2.0 * d(g.m) * d(g.n) * d(g.k) * d(g.batch);
    double bytes = F * d(g.batch) * (d(g.m * g.k) + d(g.k * g.n) + d(g.m * g.n) * (g.beta ? 2 : 1));
    return {flops, bytes};
}
// The fused product: the gemm's traffic, plus the bias read once and, with GELU, the
// pre-activation written (forward) or read (backward) beside C (the activation's FLOPs per
// element as in act_fwd / act_bwd); a bias gradient adds its sums over A, which the product
// reads anyway.
Cost formula(Op<OpId::gemm_epilogue>, Device& dev, const GemmArgs& g, const GemmEpilogue& e) {
    Cost c = formula(Op<OpId::gemm>{}, dev, g);
    const double mn = d(g.m * g.n);
    if (e.bias) c = {c.flops + mn, c.bytes + F * d(g.n)};
    if (e.act == EpilogueAct::gelu) c = {c.flops + 10 * mn, c.bytes + F * mn};
    if (e.act == EpilogueAct::gelu_grad) c = {c.flops + 15 * mn, c.bytes + F * mn};
    if (e.dbias) c = {c.flops + d(g.m * g.k), c.bytes + 2 * F * d(g.m)};  // A's sums, += dbias
    return c;
}
// Counted at the capacity (the group sizes stay on the device): exact for a dropless MoE,
// whose groups fill it.
Cost formula(Op<OpId::gemm_grouped>, Device&, const GemmArgs& g, const Tensor&, int64_t groups,
             GroupDim dim) {
    const double flops = 2.0 * d(g.m) * d(g.n) * d(g.k);
    const double weights = d(groups) * d(dim == GroupDim::m ? g.k * g.n : g.m * g.n);
    const double rows =
        dim == GroupDim::m ? d(g.m) * d(g.k + g.n * (g.beta ? 2 : 1)) : d(g.k) * d(g.m + g.n);
    const double bytes = F * (rows + weights * (dim == GroupDim::k && g.beta ? 2 : 1));
    return {flops, bytes};
}
Cost formula(Op<OpId::add>, Device&, const Tensor&, const Tensor&, const Tensor&, int64_t n) {
    return {d(n), 3 * F * d(n)};
}
Cost formula(Op<OpId::axpby>, Device&, const Tensor&, float, const Tensor&, float, int64_t n) {
    return {3 * d(n), 3 * F * d(n)};
}
Cost formula(Op<OpId::add_bias>, Device&, const Tensor&, const Tensor&, int64_t rows,
             int64_t cols) {
    return {d(rows * cols), 2 * F * d(rows * cols)};
}
Cost formula(Op<OpId::bias_grad>, Device&, const Tensor&, const Tensor& dy, int64_t rows,
             int64_t cols) {
    return {d(rows * cols), bytes_of(dy) * d(rows * cols)};
}
Cost formula(Op<OpId::embedding_fwd>, Device&, const Tensor&, const Tensor&, const Tensor&,
             int64_t n, int64_t dim, bool accumulate) {
    return {0, F * d(n * dim) * (accumulate ? 3 : 2)};
}
Cost formula(Op<OpId::embedding_bwd>, Device&, const Tensor&, const Tensor&, const Tensor&,
             int64_t n, int64_t dim) {
    return {d(n * dim), 3 * F * d(n * dim)};
}
Cost formula(Op<OpId::rmsnorm_fwd>, Device&, const Tensor& y, const Tensor&, const Tensor&,
             const Tensor&, int64_t rows, int64_t dim, float) {
    return {4 * d(rows * dim), (F + bytes_of(y)) * d(rows * dim)};
}
Cost formula(Op<OpId::rmsnorm_bwd>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, int64_t rows, int64_t dim,
             bool accumulate_dx) {
    return {8 * d(rows * dim), F * d(rows * dim) * (accumulate_dx ? 4 : 3)};
}
Cost formula(Op<OpId::layernorm_fwd>, Device&, const Tensor& y, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, int64_t rows, int64_t dim, float) {
    return {6 * d(rows * dim), (F + bytes_of(y)) * d(rows * dim)};
}
Cost formula(Op<OpId::layernorm_bwd>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
             int64_t rows, int64_t dim, bool accumulate_dx) {
    return {10 * d(rows * dim), F * d(rows * dim) * (accumulate_dx ? 4 : 3)};
}
Cost formula(Op<OpId::rope>, Device&, const Tensor&, int64_t B, int64_t T, int64_t nh, int64_t hd,
             float, int64_t, const Tensor&, bool) {
    double n = d(B * T * nh * hd);
    return {3 * n, 2 * F * n};
}
Cost formula(Op<OpId::kv_append>, Device&, const Tensor&, const Tensor& rows, int64_t B, int64_t T,
             int64_t, int64_t row_len, int64_t, const Tensor&) {
    return {0, 2.0 * d(B * T * row_len) * d(dtype_size(rows.dtype))};
}
Cost formula(Op<OpId::attention_fwd>, Device& inner, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const AttnDims& a, float) {
    // q.k and p.v over the causal half: 2 * 2 * B * H * Tq * Tk/2 * hd (Tq = Tk in training).
    const double Tk = d(a.Tk + device_value(inner, a.tk_dev));
    double flops = 2.0 * d(a.B * a.H) * d(a.Tq) * Tk * d(a.hd);
    double bytes = F * d(a.B) * (2 * d(a.Tq * a.H * a.hd) + 2 * Tk * d(a.K * a.hd));
    return {flops, bytes};
}
Cost formula(Op<OpId::attention_bwd>, Device& inner, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const AttnDims& a, float) {
    const double Tk = d(a.Tk + device_value(inner, a.tk_dev));
    double flops = 5.0 * d(a.B * a.H) * d(a.Tq) * Tk * d(a.hd);  // recompute s + 4 products
    double bytes = F * d(a.B) * (4 * d(a.Tq * a.H * a.hd) + 4 * Tk * d(a.K * a.hd));
    return {flops, bytes};
}
Cost formula(Op<OpId::act_fwd>, Device&, Act, const Tensor& y, const Tensor&, int64_t n) {
    return {10 * d(n), (F + bytes_of(y)) * d(n)};
}
Cost formula(Op<OpId::act_bwd>, Device&, Act, const Tensor& dx, const Tensor&, const Tensor&,
             int64_t n) {
    return {15 * d(n), (2 * F + bytes_of(dx)) * d(n)};
}
Cost formula(Op<OpId::swiglu_fwd>, Device&, const Tensor& h, const Tensor&, const Tensor&,
             int64_t n) {
    return {6 * d(n), (2 * F + bytes_of(h)) * d(n)};
}
Cost formula(Op<OpId::swiglu_bwd>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, int64_t n) {
    return {10 * d(n), 5 * F * d(n)};
}
Cost formula(Op<OpId::softmax>, Device&, const Tensor&, const Tensor&, int64_t rows, int64_t cols) {
    return {5 * d(rows * cols), 2 * F * d(rows * cols)};
}
Cost formula(Op<OpId::router_fwd>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, int64_t N, int64_t E, int64_t,
             const RouterArgs&) {
    return {5 * d(N * E), 2 * F * d(N * E)};
}
Cost formula(Op<OpId::router_bwd>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t N,
             int64_t E, int64_t, const RouterArgs&, float, float, float) {
    return {6 * d(N * E), 3 * F * d(N * E)};
}
Cost formula(Op<OpId::router_aux_loss>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, int64_t N, int64_t E, int64_t, const RouterArgs&, float, float) {
    return {2 * d(N * E), F * d(N * E)};
}
Cost formula(Op<OpId::hash_route>, Device&, const Tensor&, const Tensor&, int64_t N, int64_t,
             int64_t) {
    return {10 * d(N), 2 * F * d(N)};
}
Cost formula(Op<OpId::moe_capacity>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, int64_t N, int64_t k, int64_t, int64_t) {
    return {0, 3 * F * d(N * k)};
}
Cost formula(Op<OpId::moe_capacity_shares>, Device&, const Tensor&, const Tensor&, int64_t N,
             int64_t k, int64_t E, int64_t, int64_t ranks) {
    return {0, F * d(N * k) + F * d(ranks * k * E)};
}
Cost formula(Op<OpId::moe_sort>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, int64_t N, int64_t k, int64_t) {
    return {0, 4 * F * d(N * k)};
}
Cost formula(Op<OpId::gather_rows>, Device&, const Tensor&, const Tensor&, const Tensor&, int64_t R,
             int64_t dim) {
    return {0, 2 * F * d(R * dim)};
}
Cost formula(Op<OpId::moe_combine>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, int64_t N, int64_t k, int64_t dim, bool accumulate) {
    return {2 * d(N * k * dim), F * d(N * dim) * (d(k) + (accumulate ? 2 : 1))};
}
Cost formula(Op<OpId::moe_combine_bwd>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, int64_t N, int64_t k, int64_t dim) {
    return {3 * d(N * k * dim), F * d(N * dim) * (2 * d(k) + 1)};
}
Cost formula(Op<OpId::add_counts>, Device&, const Tensor&, const Tensor&, int64_t n) {
    return {d(n), 3 * F * d(n)};
}
Cost formula(Op<OpId::expert_bias_update>, Device&, const Tensor&, const Tensor&, int64_t E,
             double) {
    return {3 * d(E), 3 * F * d(E)};
}
Cost formula(Op<OpId::cross_entropy>, Device&, const Tensor&, const Tensor&, const Tensor&,
             int64_t N, int64_t V, float grad_scale, const Tensor& dlogits) {
    const double written = grad_scale == 0 ? 0 : dlogits ? bytes_of(dlogits) : F;
    return {5 * d(N * V), (F + written) * d(N * V)};
}
Cost formula(Op<OpId::sum>, Device&, const Tensor&, const Tensor&, int64_t n, float, bool) {
    return {d(n), F * d(n)};
}
Cost formula(Op<OpId::sum_squares>, Device&, const Tensor&, const Tensor&, int64_t n, bool) {
    return {2 * d(n), F * d(n)};
}
Cost formula(Op<OpId::adamw>, Device&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
             int64_t n, const AdamWArgs&, const Tensor&, float, float) {
    return {15 * d(n), 7 * F * d(n)};
}
Cost formula(Op<OpId::adamw8bit>, Device&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, int64_t n, const AdamWArgs&,
             const Tensor&, float, float) {
    // Per element: p read + written, g read, two code bytes read + written (absmax: 1/256).
    // FLOPs: the AdamW update, two dequantisations and two 8-step code searches.
    return {40 * d(n), (3 * F + 4 + 4 * F / 256) * d(n)};
}
Cost formula(Op<OpId::sgd>, Device&, const Tensor&, const Tensor&, int64_t n, float, const Tensor&,
             float, float) {
    return {3 * d(n), 3 * F * d(n)};
}
Cost formula(Op<OpId::sample>, Device&, const Tensor&, const Tensor&, int64_t B, int64_t V,
             const SampleArgs&) {
    return {5 * d(B * V), F * d(B * V)};
}

// The name an op is booked under: its own, with the attention kernels' variant appended when
// the device has several (attention_fwd[wmma], attention_fwd[scalar]).
template <typename A>
void attention_variant(std::string& variant, const Device& inner, const A& arg) {
    if constexpr (std::is_same_v<A, AttnDims>) variant = inner.attention_kernel(arg);
}
std::string grouped_variant(const Device& inner, const GemmArgs& g, const Tensor&, int64_t,
                            GroupDim dim) {
    return inner.gemm_grouped_kernel(g, dim);
}
// A product's shape for ProfilingDevice's by-shape rows: " 16384x2304x768 NT f32*bf16" (m x n x
// k, op(A) and op(B) transposed or not, A's and B's stored dtypes), then the batch and the
// epilogue's parts ("+bias", "+gelu", "+gelu_grad", "+dbias") where there are any.
std::string gemm_shape(const GemmArgs& g) {
    std::string s = " " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
                    std::to_string(g.k) + " " + (g.ta == Trans::T ? "T" : "N") +
                    (g.tb == Trans::T ? "T" : "N") + " " + dtype_name(g.a.dtype) + "*" +
                    dtype_name(g.b.dtype);
    if (g.compute != g.a.dtype || g.compute != g.b.dtype)
        s += std::string("->") + dtype_name(g.compute);
    if (g.batch > 1) s += " batch " + std::to_string(g.batch);
    if (g.beta != 0.0f) s += " +C";
    return s;
}
std::string epilogue_shape(const GemmEpilogue& e) {
    std::string s;
    if (e.bias) s += "+bias";
    if (e.act == EpilogueAct::gelu) s += "+gelu";
    if (e.act == EpilogueAct::gelu_grad) s += "+gelu_grad";
    if (e.dbias) s += "+dbias";
    return s.empty() ? s : " " + s;
}
template <typename... Args>
std::string shape_of(const GemmArgs& g, const Args&... rest) {
    std::string s = gemm_shape(g);
    if constexpr (sizeof...(rest) == 1) s += epilogue_shape(rest...);
    return s;
}

template <OpId O, typename... Args>
std::string label(const char* name, bool by_shape, const Device& inner, const Args&... args) {
    std::string variant;
    if constexpr (O == OpId::attention_fwd || O == OpId::attention_bwd)
        (attention_variant(variant, inner, args), ...);
    if constexpr (O == OpId::gemm_epilogue) variant = inner.gemm_epilogue_kernel(args...);
    if constexpr (O == OpId::gemm_grouped) variant = grouped_variant(inner, args...);
    std::string l = variant.empty() ? std::string(name) : std::string(name) + "[" + variant + "]";
    if constexpr (O == OpId::gemm || O == OpId::gemm_epilogue) {
        if (by_shape) l += shape_of(args...);
    }
    return l;
}

// An op's formula when it has one, else the default (no FLOPs, every tensor view once).
template <OpId O, typename... Args>
Cost cost(Device& inner, const Args&... args) {
    if constexpr (requires { formula(Op<O>{}, inner, args...); })
        return formula(Op<O>{}, inner, args...);
    else
        return {0, (0.0 + ... + view_bytes(args))};
}
}  // namespace

template <typename Fn>
void ProfilingDevice::timed(const std::string& op, double flops, double bytes, Fn&& fn) {
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

// Every op: its cost (from the arguments, before the op runs), then the op timed on the
// wrapped device.
#define MT_PROFILED_ARGS(...) __VA_ARGS__
#define MT_DEVICE_OP(name, params, args, ...)                                              \
    void ProfilingDevice::name##_impl params {                                             \
        const Cost c = cost<OpId::name>(inner_, MT_PROFILED_ARGS args);                    \
        timed(label<OpId::name>(#name, by_shape_, inner_, MT_PROFILED_ARGS args), c.flops, \
              c.bytes, [&] { inner_.name args; });                                         \
    }
#include "moetrain/device_ops.def"
#undef MT_PROFILED_ARGS

std::vector<OpProfile> ProfilingDevice::table() const {
    std::vector<OpProfile> v;
    v.reserve(table_.size());
    for (const auto& [k, p] : table_) v.push_back(p);
    std::sort(v.begin(), v.end(),
              [](const OpProfile& a, const OpProfile& b) { return a.seconds > b.seconds; });
    return v;
}

}  // namespace moetrain
