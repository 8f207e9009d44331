// The front door of every Device op (api/moetrain/device.h): check_<op> checks the host-side
// arguments once, for every backend, with one message per problem, before the backend's
// <op>_impl runs. Ops whose row in api/moetrain/device_ops.def states its checks get check_<op>
// generated from the row (at the end of this file); the others are written here. A tensor argument
// is checked for the device that owns it, its view bounds, its dtype and the elements the op
// touches; sizes must be non-negative; the op-specific rules (attention shape, GEMM leading
// dimensions and dtypes, router and sampling parameters) follow. What a backend cannot serve (CUDA
// grid limits, OpenCL int ranges) and values that live in device memory (index tensors, group
// sizes, the device-side values) are checked by the backends themselves.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "moetrain/device.h"
#include "shared/gemm_dtypes.h"
#include "shared/grouped_gemm.h"
#include "shared/mt_math.h"

namespace moetrain {
namespace {

bool is_float_type(DType t) {
    return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}

// Whether the first nx elements of x and the first ny of y share a byte.
bool overlap(const Tensor& x, int64_t nx, const Tensor& y, int64_t ny) {
    const auto sx = static_cast<int64_t>(dtype_size(x.dtype));
    const auto sy = static_cast<int64_t>(dtype_size(y.dtype));
    return x.buf == y.buf && x.offset * sx < (y.offset + ny) * sy &&
           y.offset * sy < (x.offset + nx) * sx;
}

// The checks of one op call: `owner` is the device whose buffers the op accepts.
class OpArgs {
  public:
    OpArgs(const Device* owner, const char* op) : owner_(owner), op_(op) {}

    // Every size >= 0.
    const OpArgs& sizes(std::initializer_list<int64_t> sizes) const {
        for (int64_t s : sizes) MT_CHECK(s >= 0, op_, ": negative size ", s);
        return *this;
    }
    // A non-empty tensor on the owning device whose view lies inside its buffer (any dtype).
    void view(const Tensor& t, const char* arg) const {
        MT_CHECK(t.buf, op_, ": tensor '", arg, "' is empty");
        MT_CHECK(t.device() == owner_, op_, ": tensor '", arg, "' lives on another device");
        MT_CHECK(t.offset >= 0 && static_cast<size_t>(t.offset) * dtype_size(t.dtype) + t.bytes() <=
                                      t.buf->bytes(),
                 op_, ": tensor '", arg, "' view exceeds its buffer");
    }
    // view() plus the dtype and at least n elements; n == 0 also accepts an empty tensor.
    void tensor(const Tensor& t, DType dtype, int64_t n, const char* arg) const {
        if (n == 0 && !t.buf) return;
        view(t, arg);
        MT_CHECK(t.dtype == dtype, op_, ": tensor '", arg, "' is ", dtype_name(t.dtype),
                 ", expected ", dtype_name(dtype));
        MT_CHECK(t.numel() >= n, op_, ": tensor '", arg, "' has ", t.numel(),
                 " elements, the op needs ", n);
    }
    void f32(const Tensor& t, int64_t n, const char* arg) const { tensor(t, DType::f32, n, arg); }
    // Several f32 arguments: {tensor, elements, name} each.
    struct Want {
        const Tensor& t;
        int64_t n;
        const char* arg;
    };
    void f32(std::initializer_list<Want> wants) const {
        for (const Want& w : wants) f32(w.t, w.n, w.arg);
    }
    void i32(const Tensor& t, int64_t n, const char* arg) const { tensor(t, DType::i32, n, arg); }
    // An f32, bf16 or f16 tensor of at least n elements (an output stored in its own dtype).
    void floating(const Tensor& t, int64_t n, const char* arg) const {
        view(t, arg);
        MT_CHECK(is_float_type(t.dtype), op_, ": tensor '", arg, "' is ", dtype_name(t.dtype),
                 ", expected f32, bf16 or f16");
        tensor(t, t.dtype, n, arg);
    }
    // An argument that may be empty ("may be empty" in the op's contract).
    void f32_opt(const Tensor& t, int64_t n, const char* arg) const {
        if (t.buf) f32(t, n, arg);
    }
    // A 16-bit output y shares no byte with the input x (written values would be re-read).
    void apart16(const Tensor& y, int64_t ny, const Tensor& x, int64_t nx, const char* y_arg,
                 const char* x_arg) const {
        MT_CHECK(y.dtype == DType::f32 || !overlap(y, ny, x, nx), op_, ": the 16-bit '", y_arg,
                 "' overlaps '", x_arg, "'");
    }
    // A device-side value (device.h): an i32 [1] tensor, or empty.
    void device_value(const Tensor& t, const char* arg) const {
        if (t.buf) i32(t, 1, arg);
    }
    // The squared gradient norm of the optimizers: needed when clipping, one f32 if given.
    void gnorm(const Tensor& gnorm_sq, float clip) const {
        MT_CHECK(clip <= 0.0f || gnorm_sq.buf, op_, ": clipping (clip ", clip,
                 ") needs the gnorm_sq tensor");
        f32_opt(gnorm_sq, 1, "gnorm_sq");
    }
    void bias_corrections(const AdamWArgs& a) const {
        MT_CHECK(a.bc1 > 0 && a.bc2 > 0, op_, ": bias corrections must be positive (step >= 1)");
    }
    // The AttnDims rules (device.h), shared by the forward and the backward.
    void attention(const AttnDims& d) const {
        sizes({d.B, d.Tq, d.Tk, d.S, d.H, d.K, d.hd});
        MT_CHECK(d.K > 0 && d.H > 0 && d.H % d.K == 0, op_, ": n_heads ", d.H,
                 " is not a multiple of n_kv_heads ", d.K);
        MT_CHECK(d.Tq <= d.Tk, op_, ": Tq ", d.Tq, " > Tk ", d.Tk);
        MT_CHECK(d.Tk <= d.S, op_, ": Tk ", d.Tk, " > capacity S ", d.S);
        MT_CHECK(d.hd > 0, op_, ": head_dim must be positive");
        MT_CHECK(d.compute == DType::f32 || d.compute == DType::bf16 || d.compute == DType::f16,
                 op_, ": attention precision ", dtype_name(d.compute), " is not f32, bf16 or f16");
        device_value(d.tk_dev, "tk_dev");
    }
    // The routing sizes of router_fwd / router_bwd / router_aux_loss.
    void router(int64_t N, int64_t E, int64_t k) const {
        sizes({N, E, k});
        MT_CHECK(E >= 1, op_, ": n_experts must be >= 1");
        MT_CHECK(k >= 1 && k <= E, op_, ": top_k ", k, " outside 1..n_experts (", E, ")");
    }
    // The routed scaling of RouterArgs.
    void router_args(const RouterArgs& r) const {
        MT_CHECK(std::isfinite(r.scaling) && r.scaling > 0, op_, ": routed scaling ", r.scaling,
                 " must be finite and > 0");
    }
    // n rows of length dim > 0 (normalisation, embedding): the sizes, then dim itself.
    void rows(int64_t n, int64_t dim) const {
        sizes({n, dim});
        MT_CHECK(dim > 0, op_, ": dim must be positive");
    }

  private:
    const Device* owner_;
    const char* op_;
};

// The weight-gradient bias epilogue (GemmEpilogue::dbias): the column sums of the stored A.
void check_epilogue_dbias(const OpArgs& c, const GemmArgs& g, const GemmEpilogue& e) {
    MT_CHECK(g.ta == Trans::T && g.lda == g.m,
             "gemm_epilogue: dbias needs A stored densely and transposed (ta T, lda m)");
    MT_CHECK(g.alpha == 1.0f, "gemm_epilogue: alpha ", g.alpha, " with dbias (must be 1)");
    MT_CHECK(!e.bias && e.act == EpilogueAct::none,
             "gemm_epilogue: dbias with a bias or an activation");
    // A: f32, or stored in the 16-bit compute type (a gradient rounded once for both products;
    // check_gemm checked its dtype against the compute type).
    c.tensor(g.a, g.a.dtype, g.k * g.m, "a");
    c.f32(e.dbias, g.m, "dbias");
    MT_CHECK(!overlap(e.dbias, g.m, g.c, g.m * g.n), "gemm_epilogue: dbias overlaps C");
    MT_CHECK(!overlap(e.dbias, g.m, g.a, g.k * g.m), "gemm_epilogue: dbias overlaps A");
}

}  // namespace

// ---- memory ----

void Device::check_copy(const Tensor& dst, const Tensor& src) const {
    MT_CHECK(dst.dtype == src.dtype, "copy: dtype mismatch (", dtype_name(dst.dtype), " <- ",
             dtype_name(src.dtype), ")");
    MT_CHECK(src.numel() >= dst.numel(), "copy: source has ", src.numel(),
             " elements, destination ", dst.numel());
    const OpArgs c(tensor_owner(), "copy");
    c.view(dst, "dst");
    c.view(src, "src");
}

void Device::check_convert(const Tensor& dst, const Tensor& src) const {
    MT_CHECK(is_float_type(dst.dtype) && is_float_type(src.dtype),
             "convert: ", dtype_name(src.dtype), " -> ", dtype_name(dst.dtype),
             " is not supported (f32 / bf16 / f16 only)");
    MT_CHECK(src.numel() >= dst.numel(), "convert: source has ", src.numel(),
             " elements, destination ", dst.numel());
    const OpArgs c(tensor_owner(), "convert");
    c.view(dst, "dst");
    c.view(src, "src");
}

// ---- dense algebra ----

void Device::check_gemm(const GemmArgs& g) const {
    check_gemm_dtypes(g);
    const OpArgs c(tensor_owner(), "gemm");
    c.sizes({g.m, g.n, g.k, g.stride_a, g.stride_b, g.stride_c});
    MT_CHECK(g.batch >= 1, "gemm: batch ", g.batch, " < 1");
    // Stored shapes: A is [m,k] (N) or [k,m] (T); B is [k,n] (N) or [n,k] (T); C is [m,n].
    const int64_t a_rows = g.ta == Trans::N ? g.m : g.k, a_cols = g.ta == Trans::N ? g.k : g.m;
    const int64_t b_rows = g.tb == Trans::N ? g.k : g.n, b_cols = g.tb == Trans::N ? g.n : g.k;
    MT_CHECK(g.lda >= std::max<int64_t>(1, a_cols), "gemm: lda ", g.lda, " < ", a_cols);
    MT_CHECK(g.ldb >= std::max<int64_t>(1, b_cols), "gemm: ldb ", g.ldb, " < ", b_cols);
    MT_CHECK(g.ldc >= std::max<int64_t>(1, g.n), "gemm: ldc ", g.ldc, " < ", g.n);
    if (g.m == 0 || g.n == 0) return;  // nothing is read or written
    c.f32(g.c, gemm_span(g.batch, g.stride_c, g.m, g.n, g.ldc), "c");
    if (g.k == 0) return;  // C = beta * C: A and B are not read
    c.tensor(g.a, g.a.dtype, gemm_span(g.batch, g.stride_a, a_rows, a_cols, g.lda), "a");
    c.tensor(g.b, g.b.dtype, gemm_span(g.batch, g.stride_b, b_rows, b_cols, g.ldb), "b");
}

void Device::check_gemm_epilogue(const GemmArgs& g, const GemmEpilogue& e) const {
    check_gemm(g);
    const OpArgs c(tensor_owner(), "gemm_epilogue");
    MT_CHECK(g.batch == 1, "gemm_epilogue: batch ", g.batch, " (one product only)");
    MT_CHECK(g.ldc == g.n, "gemm_epilogue: ldc ", g.ldc, " != n ", g.n, " (C must be dense)");
    if (e.bias) {
        c.f32(e.bias, g.n, "bias");
        MT_CHECK(!overlap(e.bias, g.n, g.c, g.m * g.n), "gemm_epilogue: bias overlaps C");
    }
    if (e.dbias) check_epilogue_dbias(c, g, e);
    if (e.act == EpilogueAct::none) {
        MT_CHECK(!e.pre_act, "gemm_epilogue: pre_act is given without gelu");
        return;
    }
    MT_CHECK(!e.bias || e.act != EpilogueAct::gelu_grad,
             "gemm_epilogue: a bias with gelu_grad (the backward takes none)");
    MT_CHECK(g.beta == 0.0f, "gemm_epilogue: beta ", g.beta, " with gelu (must be 0)");
    c.f32(e.pre_act, g.m * g.n, "pre_act");
    // pre_act is written (gelu) or read while C is written (gelu_grad): it may share no byte
    // with C, nor under gelu (written while they are read) with A, B or the bias.
    const int64_t mn = g.m * g.n;
    MT_CHECK(!overlap(e.pre_act, mn, g.c, mn), "gemm_epilogue: pre_act overlaps C");
    if (e.act == EpilogueAct::gelu && g.k > 0) {
        const int64_t a_span =
            gemm_span(1, 0, g.ta == Trans::N ? g.m : g.k, g.ta == Trans::N ? g.k : g.m, g.lda);
        const int64_t b_span =
            gemm_span(1, 0, g.tb == Trans::N ? g.k : g.n, g.tb == Trans::N ? g.n : g.k, g.ldb);
        MT_CHECK(!overlap(e.pre_act, mn, g.a, a_span), "gemm_epilogue: pre_act overlaps A");
        MT_CHECK(!overlap(e.pre_act, mn, g.b, b_span), "gemm_epilogue: pre_act overlaps B");
    }
    if (e.act == EpilogueAct::gelu && e.bias)
        MT_CHECK(!overlap(e.pre_act, mn, e.bias, g.n), "gemm_epilogue: pre_act overlaps the bias");
}

void Device::check_gemm_grouped(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                                GroupDim dim) const {
    check_grouped_args(g, group_rows, groups, dim);
    const OpArgs c(tensor_owner(), "gemm_grouped");
    c.i32(group_rows, groups, "group_rows");
    const GroupedSpans s = grouped_spans(g, groups, dim);
    c.tensor(g.a, g.a.dtype, s.a, "a");
    c.tensor(g.b, g.b.dtype, s.b, "b");
    c.tensor(g.c, DType::f32, s.c, "c");
}

// ---- embedding ----

void Device::check_embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids,
                                 int64_t n, int64_t dim, bool) const {
    const OpArgs c(tensor_owner(), "embedding_fwd");
    c.rows(n, dim);
    c.f32(out, n * dim, "out");
    c.f32(table, dim, "table");
    MT_CHECK(table.numel() % dim == 0, "embedding_fwd: table of ", table.numel(),
             " elements is not whole rows of ", dim);
    c.i32(ids, n, "ids");
}

// ---- positions, KV cache, attention ----

void Device::check_rope(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
                        int64_t pos0, const Tensor& pos_dev, bool) const {
    const OpArgs c(tensor_owner(), "rope");
    c.sizes({B, T, nh, hd, pos0});
    MT_CHECK(hd % 2 == 0, "rope: head_dim ", hd, " is odd");
    MT_CHECK(theta > 0, "rope: theta ", theta, " must be positive");
    MT_CHECK(pos0 + T <= MT_POS_LIMIT, "rope: positions ", pos0, "..", pos0 + T - 1,
             " outside [0, 2^30)");
    c.f32(x, B * T * nh * hd, "x");
    c.device_value(pos_dev, "pos_dev");
}

void Device::check_kv_append(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T,
                             int64_t S, int64_t row_len, int64_t pos0,
                             const Tensor& pos_dev) const {
    const OpArgs c(tensor_owner(), "kv_append");
    c.sizes({B, T, S, row_len, pos0});
    MT_CHECK(pos0 + T <= S, "kv_append: rows ", pos0, "..", pos0 + T - 1, " exceed the capacity ",
             S);
    MT_CHECK(cache.dtype == rows.dtype, "kv_append: dtype mismatch (cache ",
             dtype_name(cache.dtype), ", rows ", dtype_name(rows.dtype), ")");
    c.tensor(cache, cache.dtype, B * S * row_len, "cache");
    c.tensor(rows, rows.dtype, B * T * row_len, "rows");
    c.device_value(pos_dev, "pos_dev");
}

void Device::check_attention_fwd(const Tensor& o, const Tensor& lse, const Tensor& q,
                                 const Tensor& k, const Tensor& v, const AttnDims& d, float) const {
    const OpArgs c(tensor_owner(), "attention_fwd");
    c.attention(d);
    const int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd;
    c.f32({{o, nq, "o"}, {lse, d.B * d.H * d.Tq, "lse"}, {q, nq, "q"}, {k, nk, "k"}, {v, nk, "v"}});
}

void Device::check_attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                 const Tensor& dout, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& o, const Tensor& lse,
                                 const AttnDims& d, float) const {
    const OpArgs c(tensor_owner(), "attention_bwd");
    c.attention(d);
    const int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd;
    c.f32({{dq, nq, "dq"},
           {dk, nk, "dk"},
           {dv, nk, "dv"},
           {dout, nq, "dout"},
           {q, nq, "q"},
           {k, nk, "k"},
           {v, nk, "v"},
           {o, nq, "o"},
           {lse, d.B * d.H * d.Tq, "lse"}});
}

// ---- MoE routing ----

void Device::check_router_fwd(const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                              const Tensor& topk_w, const Tensor& logits, const Tensor& bias,
                              int64_t N, int64_t E, int64_t k, const RouterArgs& r) const {
    const OpArgs c(tensor_owner(), "router_fwd");
    c.router(N, E, k);
    c.router_args(r);
    c.f32(probs, N * E, "probs");
    c.f32(lse, N, "lse");
    c.i32(topk_idx, N * k, "topk_idx");
    c.f32(topk_w, N * k, "topk_w");
    c.f32(logits, N * E, "logits");
    c.f32_opt(bias, E, "bias");
}

void Device::check_router_bwd(const Tensor& dlogits, const Tensor& dtopk_w, const Tensor& probs,
                              const Tensor& lse, const Tensor& logits, const Tensor& topk_idx,
                              const Tensor& topk_w, const Tensor& counts, int64_t N, int64_t E,
                              int64_t k, const RouterArgs& r, float, float, float) const {
    const OpArgs c(tensor_owner(), "router_bwd");
    c.router(N, E, k);
    c.router_args(r);
    c.f32({{dlogits, N * E, "dlogits"},
           {dtopk_w, N * k, "dtopk_w"},
           {probs, N * E, "probs"},
           {lse, N, "lse"},
           {logits, N * E, "logits"}});
    c.i32(topk_idx, N * k, "topk_idx");
    c.f32(topk_w, N * k, "topk_w");
    c.i32(counts, E, "counts");
}

void Device::check_router_aux_loss(const Tensor& out, const Tensor& probs, const Tensor& lse,
                                   const Tensor& counts, int64_t N, int64_t E, int64_t k,
                                   const RouterArgs& r, float, float) const {
    const OpArgs c(tensor_owner(), "router_aux_loss");
    c.router(N, E, k);
    c.router_args(r);
    c.f32({{out, 2, "out"}, {probs, N * E, "probs"}, {lse, N, "lse"}});
    c.i32(counts, E, "counts");
}

void Device::check_hash_route(const Tensor& topk_idx, const Tensor& ids, int64_t N, int64_t layer,
                              int64_t E) const {
    const OpArgs c(tensor_owner(), "hash_route");
    c.sizes({N, layer, E});
    MT_CHECK(E >= 1, "hash_route: n_experts must be >= 1");
    c.i32(topk_idx, N, "topk_idx");
    c.i32(ids, N, "ids");
}

void Device::check_moe_capacity(const Tensor& kept_idx, const Tensor& counts,
                                const Tensor& topk_idx, const Tensor& offsets, int64_t N, int64_t k,
                                int64_t E, int64_t capacity) const {
    const OpArgs c(tensor_owner(), "moe_capacity");
    c.sizes({N, k, E, capacity});
    MT_CHECK(E >= 1 && k >= 1, "moe_capacity: n_experts and top_k must be >= 1");
    c.i32(kept_idx, N * k, "kept_idx");
    c.i32(counts, E, "counts");
    c.i32(topk_idx, N * k, "topk_idx");
    if (offsets.buf) c.i32(offsets, k * E, "offsets");
}

void Device::check_moe_capacity_shares(const Tensor& shares, const Tensor& topk_idx, int64_t N,
                                       int64_t k, int64_t E, int64_t rank, int64_t ranks) const {
    const OpArgs c(tensor_owner(), "moe_capacity_shares");
    c.sizes({N, k, E, rank, ranks});
    MT_CHECK(E >= 1 && k >= 1, "moe_capacity_shares: n_experts and top_k must be >= 1");
    MT_CHECK(ranks >= 1 && rank < ranks, "moe_capacity_shares: rank ", rank, " outside 0..",
             ranks - 1);
    c.i32(shares, ranks * k * E, "shares");
    c.i32(topk_idx, N * k, "topk_idx");
}

void Device::check_moe_sort(const Tensor& counts, const Tensor& row_token, const Tensor& slot_row,
                            const Tensor& topk_idx, int64_t N, int64_t k, int64_t E) const {
    const OpArgs c(tensor_owner(), "moe_sort");
    c.sizes({N, k, E});
    MT_CHECK(E >= 1 && k >= 1, "moe_sort: n_experts and top_k must be >= 1");
    c.i32(counts, E, "counts");
    c.i32(row_token, N * k, "row_token");
    c.i32(slot_row, N * k, "slot_row");
    c.i32(topk_idx, N * k, "topk_idx");
}

void Device::check_moe_combine_bwd(const Tensor& drows, const Tensor& dw, const Tensor& dy,
                                   const Tensor& rows, const Tensor& slot_row, const Tensor& w,
                                   int64_t N, int64_t k, int64_t dim) const {
    const OpArgs c(tensor_owner(), "moe_combine_bwd");
    c.sizes({N, k, dim});
    c.f32(drows, N * k * dim, "drows");
    c.f32_opt(dw, N * k, "dw");
    c.f32(dy, N * dim, "dy");
    if (dw.buf)
        c.f32(rows, N * k * dim, "rows");  // dw reads the rows
    else
        c.f32_opt(rows, N * k * dim, "rows");
    c.i32(slot_row, N * k, "slot_row");
    c.f32_opt(w, N * k, "w");
}

void Device::check_expert_bias_update(const Tensor& bias, const Tensor& counts, int64_t E,
                                      double rate) const {
    const OpArgs c(tensor_owner(), "expert_bias_update");
    c.sizes({E});
    MT_CHECK(E >= 1, "expert_bias_update: n_experts must be >= 1");
    MT_CHECK(std::isfinite(rate) && rate >= 0, "expert_bias_update: rate ", rate,
             " must be finite and >= 0");
    c.f32(bias, E, "bias");
    c.i32(counts, E, "counts");
}

// ---- loss, reductions ----

void Device::check_cross_entropy(const Tensor& losses, const Tensor& logits, const Tensor& targets,
                                 int64_t N, int64_t V, float, const Tensor& dlogits) const {
    const OpArgs c(tensor_owner(), "cross_entropy");
    c.sizes({N, V});
    MT_CHECK(V >= 1, "cross_entropy: vocabulary size must be >= 1");
    c.f32(losses, N, "losses");
    c.f32(logits, N * V, "logits");
    c.i32(targets, N, "targets");
    if (!dlogits.buf || N * V == 0) return;
    c.floating(dlogits, N * V, "dlogits");
    const bool in_place =
        dlogits.buf == logits.buf && dlogits.offset == logits.offset && dlogits.dtype == DType::f32;
    MT_CHECK(in_place || !overlap(dlogits, N * V, logits, N * V),
             "cross_entropy: dlogits overlaps the logits (pass the logits themselves, or a "
             "separate tensor)");
}

// ---- optimizers ----

void Device::check_adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                         int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                         float) const {
    const OpArgs c(tensor_owner(), "adamw");
    c.sizes({n});
    c.bias_corrections(a);
    c.f32({{p, n, "p"}, {g, n, "g"}, {m, n, "m"}, {v, n, "v"}});
    c.gnorm(gnorm_sq, clip);
}

void Device::check_adamw8bit(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                             const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                             int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                             float) const {
    const OpArgs c(tensor_owner(), "adamw8bit");
    c.sizes({n});
    c.bias_corrections(a);
    const int64_t blocks = (n + MT_QBLOCK - 1) / MT_QBLOCK;
    c.f32(p, n, "p");
    c.f32(g, n, "g");
    c.tensor(m_codes, DType::u8, n, "m_codes");
    c.tensor(v_codes, DType::u8, n, "v_codes");
    c.f32(m_absmax, blocks, "m_absmax");
    c.f32(v_absmax, blocks, "v_absmax");
    c.gnorm(gnorm_sq, clip);
}

// ---- sampling ----

void Device::check_sample(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                          const SampleArgs& s) const {
    const OpArgs c(tensor_owner(), "sample");
    c.sizes({B, V, s.top_k});
    MT_CHECK(V >= 1, "sample: vocabulary size must be >= 1");
    MT_CHECK(s.temperature >= 0.0f && std::isfinite(s.temperature), "sample: temperature ",
             s.temperature, " must be finite and >= 0");
    MT_CHECK(s.top_p > 0.0f && s.top_p <= 1.0f, "sample: top_p ", s.top_p, " outside (0, 1]");
    c.i32(out_ids, B, "out_ids");
    c.f32(logits, B * V, "logits");
    c.device_value(s.step_dev, "step_dev");
}

// ---- the checks stated in the op table ----
// check_<op> of every row that states its checks (api/moetrain/device_ops.def), each check in
// the order the row lists it. A row's parameters are all named, and a check uses only some.
#define SIZES(...) c.sizes({__VA_ARGS__});
#define ROWS(n, dim) c.rows(n, dim);
#define F32(t, n) c.f32(t, n, #t);
#define I32(t, n) c.i32(t, n, #t);
#define F32_OPT(t, n) c.f32_opt(t, n, #t);
#define FLOAT(t, n) c.floating(t, n, #t);
#define APART16(y, ny, x, nx) c.apart16(y, ny, x, nx, #y, #x);
#define VIEW(t) c.view(t, #t);
#define GNORM(gnorm_sq, clip) c.gnorm(gnorm_sq, clip);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define MT_DEVICE_OP(name, params, args, ...)           \
    __VA_OPT__(void Device::check_##name params const { \
        const OpArgs c(tensor_owner(), #name);          \
        __VA_ARGS__                                     \
    })
#include "moetrain/device_ops.def"
#pragma GCC diagnostic pop
#undef SIZES
#undef ROWS
#undef F32
#undef I32
#undef F32_OPT
#undef FLOAT
#undef APART16
#undef VIEW
#undef GNORM

}  // namespace moetrain
