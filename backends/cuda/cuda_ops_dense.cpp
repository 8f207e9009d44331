// CUDA ops: GEMM (cuBLAS), element-wise algebra, embedding, normalisation, RoPE, the KV-cache
// append, attention and activations. Each op checks its tensors, calls the kernel launcher of
// kernels_cuda/ops.h on the device stream and checks the launch.
#include <climits>

#include "cuda/cublas_calls.h"
#include "cuda/cuda_device.h"
#include "launch.h"
#include "shared/gemm_dtypes.h"
#include "shared/kv_append_checks.h"

namespace moetrain::cuda {

static_assert(static_cast<int>(Act::gelu) == static_cast<int>(mtk::ActKind::gelu) &&
                  static_cast<int>(Act::relu) == static_cast<int>(mtk::ActKind::relu) &&
                  static_cast<int>(Act::silu) == static_cast<int>(mtk::ActKind::silu),
              "mtk::ActKind mirrors moetrain::Act");

namespace {
// Elements a strided-batched row-major operand spans: (batch-1)*stride + (rows-1)*ld + cols.
int64_t span(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
    return gemm_span(batch, stride, rows, cols, ld);
}
}  // namespace

// compute = bf16 / f16: cuBLAS multiplies 16-bit A and B directly; an f32 operand is first
// converted to `compute` (mtk::convert) over its whole span into the context scratch, so its
// ld and batch stride stay as they are.
void CudaDevice::gemm(const GemmArgs& g) {
    check_gemm_dtypes(g);
    check_sizes("gemm", {g.m, g.n, g.k, g.stride_a, g.stride_b, g.stride_c});
    MT_CHECK(g.batch >= 1, "gemm: batch ", g.batch, " < 1");
    const int64_t a_rows = g.ta == Trans::N ? g.m : g.k, a_cols = g.ta == Trans::N ? g.k : g.m;
    const int64_t b_rows = g.tb == Trans::N ? g.k : g.n, b_cols = g.tb == Trans::N ? g.n : g.k;
    MT_CHECK(g.lda >= std::max<int64_t>(1, a_cols), "gemm: lda ", g.lda, " < ", a_cols);
    MT_CHECK(g.ldb >= std::max<int64_t>(1, b_cols), "gemm: ldb ", g.ldb, " < ", b_cols);
    MT_CHECK(g.ldc >= std::max<int64_t>(1, g.n), "gemm: ldc ", g.ldc, " < ", g.n);
    if (g.m == 0 || g.n == 0) return;
    const int64_t na = span(g.batch, g.stride_a, a_rows, a_cols, g.lda);
    const int64_t nb = span(g.batch, g.stride_b, b_rows, b_cols, g.ldb);
    float* c = f32(g.c, span(g.batch, g.stride_c, g.m, g.n, g.ldc), "gemm", "c");
    if (g.compute == DType::f32) {
        const float* a = f32(g.a, na, "gemm", "a");
        const float* b = f32(g.b, nb, "gemm", "b");
        stream("gemm");
        gemm_strided(context().cublas(), g, a, b, c);
        return;
    }
    const void* a = checked(g.a, g.a.dtype, na, "gemm", "a");
    const void* b = checked(g.b, g.b.dtype, nb, "gemm", "b");
    const auto kind = static_cast<mtk::FloatKind>(g.compute);
    // 256-byte aligned parts of the scratch for the operands that need converting.
    auto part = [](bool f32, int64_t n) { return f32 ? (static_cast<size_t>(n) * 2 + 255) / 256 * 256 : 0; };
    const size_t pa = part(g.a.dtype == DType::f32, na), pb = part(g.b.dtype == DType::f32, nb);
    auto* scratch = pa + pb ? static_cast<char*>(context().scratch(pa + pb)) : nullptr;
    mtk::Stream s = stream("gemm");
    if (pa) {
        mtk::convert(s, scratch, kind, a, mtk::FloatKind::f32, na);
        a = scratch;
    }
    if (pb) {
        mtk::convert(s, scratch + pa, kind, b, mtk::FloatKind::f32, nb);
        b = scratch + pa;
    }
    launched("gemm");
    gemm_strided(context().cublas(), g, a, b, c);
}

void CudaDevice::add(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) {
    check_sizes("add", {n});
    mtk::add(stream("add"), f32(out, n, "add", "out"), f32(a, n, "add", "a"), f32(b, n, "add", "b"), n);
    launched("add");
}

void CudaDevice::axpby(const Tensor& y, float alpha, const Tensor& x, float beta, int64_t n) {
    check_sizes("axpby", {n});
    mtk::axpby(stream("axpby"), f32(y, n, "axpby", "y"), alpha, f32(x, n, "axpby", "x"), beta, n);
    launched("axpby");
}

void CudaDevice::add_bias(const Tensor& y, const Tensor& bias, int64_t rows, int64_t cols) {
    check_sizes("add_bias", {rows, cols});
    mtk::add_bias(stream("add_bias"), f32(y, rows * cols, "add_bias", "y"),
                  f32(bias, cols, "add_bias", "bias"), rows, cols);
    launched("add_bias");
}

void CudaDevice::bias_grad(const Tensor& dbias, const Tensor& dy, int64_t rows, int64_t cols) {
    check_sizes("bias_grad", {rows, cols});
    float* db = f32(dbias, cols, "bias_grad", "dbias");
    const float* d = f32(dy, rows * cols, "bias_grad", "dy");
    auto* scratch = static_cast<float*>(context().scratch(mtk::colsum_scratch_bytes(rows, cols)));
    mtk::bias_grad(stream("bias_grad"), db, d, rows, cols, scratch);
    launched("bias_grad");
}

void CudaDevice::embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids,
                               int64_t n, int64_t dim, bool accumulate) {
    check_sizes("embedding_fwd", {n, dim});
    MT_CHECK(dim > 0, "embedding_fwd: dim must be positive");
    MT_CHECK(table.numel() % dim == 0, "embedding_fwd: table of ", table.numel(),
             " elements is not rows of ", dim);
    mtk::embedding_fwd(stream("embedding_fwd"), f32(out, n * dim, "embedding_fwd", "out"),
                       f32(table, dim, "embedding_fwd", "table"), table.numel() / dim,
                       i32(ids, n, "embedding_fwd", "ids"), n, dim, accumulate, error_word());
    launched("embedding_fwd");
}

void CudaDevice::embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                               int64_t n, int64_t dim) {
    check_sizes("embedding_bwd", {n, dim});
    MT_CHECK(dim > 0, "embedding_bwd: dim must be positive");
    mtk::embedding_bwd(stream("embedding_bwd"), f32(dtable, dim, "embedding_bwd", "dtable"),
                       dtable.numel() / dim, f32(dout, n * dim, "embedding_bwd", "dout"),
                       i32(ids, n, "embedding_bwd", "ids"), n, dim, error_word());
    launched("embedding_bwd");
}

void CudaDevice::rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& g,
                             int64_t rows, int64_t dim, float eps) {
    const char* op = "rmsnorm_fwd";
    check_sizes(op, {rows, dim});
    mtk::rmsnorm_fwd(stream(op), f32(y, rows * dim, op, "y"), f32(rstd, rows, op, "rstd"),
                     f32(x, rows * dim, op, "x"), f32(g, dim, op, "g"), rows, dim, eps);
    launched(op);
}

void CudaDevice::rmsnorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& dy, const Tensor& x,
                             const Tensor& g, const Tensor& rstd, int64_t rows, int64_t dim,
                             bool accumulate_dx) {
    const char* op = "rmsnorm_bwd";
    check_sizes(op, {rows, dim});
    float* pdx = f32(dx, rows * dim, op, "dx");
    float* pdg = f32(dg, dim, op, "dg");
    const float* pdy = f32(dy, rows * dim, op, "dy");
    const float* px = f32(x, rows * dim, op, "x");
    const float* pg = f32(g, dim, op, "g");
    const float* pr = f32(rstd, rows, op, "rstd");
    auto* scratch = static_cast<float*>(context().scratch(mtk::colsum_scratch_bytes(rows, dim)));
    mtk::rmsnorm_bwd(stream(op), pdx, pdg, pdy, px, pg, pr, rows, dim, accumulate_dx, scratch);
    launched(op);
}

void CudaDevice::layernorm_fwd(const Tensor& y, const Tensor& mean, const Tensor& rstd,
                               const Tensor& x, const Tensor& g, const Tensor& b, int64_t rows,
                               int64_t dim, float eps) {
    const char* op = "layernorm_fwd";
    check_sizes(op, {rows, dim});
    mtk::layernorm_fwd(stream(op), f32(y, rows * dim, op, "y"), f32(mean, rows, op, "mean"),
                       f32(rstd, rows, op, "rstd"), f32(x, rows * dim, op, "x"), f32(g, dim, op, "g"),
                       f32_opt(b, dim, op, "b"), rows, dim, eps);
    launched(op);
}

void CudaDevice::layernorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& db,
                               const Tensor& dy, const Tensor& x, const Tensor& g,
                               const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t dim,
                               bool accumulate_dx) {
    const char* op = "layernorm_bwd";
    check_sizes(op, {rows, dim});
    float* pdx = f32(dx, rows * dim, op, "dx");
    float* pdg = f32(dg, dim, op, "dg");
    float* pdb = f32_opt(db, dim, op, "db");
    const float* pdy = f32(dy, rows * dim, op, "dy");
    const float* px = f32(x, rows * dim, op, "x");
    const float* pg = f32(g, dim, op, "g");
    const float* pm = f32(mean, rows, op, "mean");
    const float* pr = f32(rstd, rows, op, "rstd");
    auto* scratch = static_cast<float*>(context().scratch(mtk::colsum_scratch_bytes(rows, dim)));
    mtk::layernorm_bwd(stream(op), pdx, pdg, pdb, pdy, px, pg, pm, pr, rows, dim, accumulate_dx,
                       scratch);
    launched(op);
}

void CudaDevice::rope(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
                      int64_t pos0, const Tensor& pos_dev, bool inverse) {
    check_sizes("rope", {B, T, nh, hd, pos0});
    MT_CHECK(hd % 2 == 0, "rope: head_dim ", hd, " is odd");
    MT_CHECK(pos0 + T <= INT_MAX, "rope: position ", pos0 + T, " too large");
    float* px = f32(x, B * T * nh * hd, "rope", "x");
    const int32_t* pd = device_value(pos_dev, "rope", "pos_dev");
    mtk::rope(stream("rope"), px, B, T, nh, hd, theta, pos0, pd, inverse, error_word());
    launched("rope");
}

void CudaDevice::kv_append(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T,
                           int64_t S, int64_t row_len, int64_t pos0, const Tensor& pos_dev) {
    const char* op = "kv_append";
    check_kv_append(cache, rows, B, T, S, row_len, pos0);
    void* dst = checked(cache, cache.dtype, B * S * row_len, op, "cache");
    const void* src = checked(rows, rows.dtype, B * T * row_len, op, "rows");
    const int32_t* pd = device_value(pos_dev, op, "pos_dev");
    mtk::kv_append(stream(op), dst, src, static_cast<int>(dtype_size(cache.dtype)), B, T, S,
                   row_len, pos0, pd, error_word());
    launched(op);
}

namespace {
mtk::AttnShape checked_shape(const AttnDims& d, const char* op) {
    check_sizes(op, {d.B, d.Tq, d.Tk, d.S, d.H, d.K, d.hd});
    MT_CHECK(d.K > 0 && d.H > 0 && d.H % d.K == 0, op, ": n_heads ", d.H,
             " is not a multiple of n_kv_heads ", d.K);
    MT_CHECK(d.Tq <= d.Tk, op, ": Tq ", d.Tq, " > Tk ", d.Tk);
    MT_CHECK(d.Tk <= d.S, op, ": Tk ", d.Tk, " > capacity S ", d.S);
    MT_CHECK(d.hd > 0 && d.hd <= mtk::kMaxHeadDim, op, ": head_dim ", d.hd,
             " outside 1..", mtk::kMaxHeadDim, " (the CUDA attention kernels' limit)");
    MT_CHECK(d.H <= 65535 && d.B <= 65535, op, ": batch ", d.B, " / heads ", d.H,
             " exceed the CUDA grid limit 65535");
    return {d.B, d.Tq, d.Tk, d.S, d.H, d.K, d.hd, nullptr, nullptr};
}
}  // namespace

void CudaDevice::attention_fwd(const Tensor& o, const Tensor& lse, const Tensor& q,
                               const Tensor& k, const Tensor& v, const AttnDims& d, float scale) {
    const char* op = "attention_fwd";
    mtk::AttnShape s = checked_shape(d, op);
    s.tk_dev = device_value(d.tk_dev, op, "tk_dev");
    s.err = error_word();
    const int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd;
    mtk::attention_fwd(stream(op), f32(o, nq, op, "o"), f32(lse, d.B * d.H * d.Tq, op, "lse"),
                       f32(q, nq, op, "q"), f32(k, nk, op, "k"), f32(v, nk, op, "v"), s, scale);
    launched(op);
}

void CudaDevice::attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                               const Tensor& dout, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& o, const Tensor& lse,
                               const AttnDims& d, float scale) {
    const char* op = "attention_bwd";
    mtk::AttnShape s = checked_shape(d, op);
    s.tk_dev = device_value(d.tk_dev, op, "tk_dev");
    s.err = error_word();
    const int64_t nq = d.B * d.Tq * d.H * d.hd, nk = d.B * d.S * d.K * d.hd;
    float* pdq = f32(dq, nq, op, "dq");
    float* pdk = f32(dk, nk, op, "dk");
    float* pdv = f32(dv, nk, op, "dv");
    const float* pdo = f32(dout, nq, op, "dout");
    const float* pq = f32(q, nq, op, "q");
    const float* pk = f32(k, nk, op, "k");
    const float* pv = f32(v, nk, op, "v");
    const float* po = f32(o, nq, op, "o");
    const float* pl = f32(lse, d.B * d.H * d.Tq, op, "lse");
    auto* scratch = static_cast<float*>(context().scratch(mtk::attn_bwd_scratch_bytes(d.B, d.H, d.Tq)));
    mtk::attention_bwd(stream(op), pdq, pdk, pdv, pdo, pq, pk, pv, po, pl, s, scale, scratch);
    launched(op);
}

void CudaDevice::act_fwd(Act act, const Tensor& y, const Tensor& x, int64_t n) {
    check_sizes("act_fwd", {n});
    mtk::act_fwd(stream("act_fwd"), static_cast<mtk::ActKind>(act), f32(y, n, "act_fwd", "y"),
                 f32(x, n, "act_fwd", "x"), n);
    launched("act_fwd");
}

void CudaDevice::act_bwd(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x, int64_t n) {
    check_sizes("act_bwd", {n});
    mtk::act_bwd(stream("act_bwd"), static_cast<mtk::ActKind>(act), f32(dx, n, "act_bwd", "dx"),
                 f32(dy, n, "act_bwd", "dy"), f32(x, n, "act_bwd", "x"), n);
    launched("act_bwd");
}

void CudaDevice::swiglu_fwd(const Tensor& h, const Tensor& gate, const Tensor& up, int64_t n) {
    check_sizes("swiglu_fwd", {n});
    mtk::swiglu_fwd(stream("swiglu_fwd"), f32(h, n, "swiglu_fwd", "h"),
                    f32(gate, n, "swiglu_fwd", "gate"), f32(up, n, "swiglu_fwd", "up"), n);
    launched("swiglu_fwd");
}

void CudaDevice::swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                            const Tensor& gate, const Tensor& up, int64_t n) {
    const char* op = "swiglu_bwd";
    check_sizes(op, {n});
    mtk::swiglu_bwd(stream(op), f32(dgate, n, op, "dgate"), f32(dup, n, op, "dup"), f32(dh, n, op, "dh"),
                    f32(gate, n, op, "gate"), f32(up, n, op, "up"), n);
    launched(op);
}

void CudaDevice::softmax(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
    check_sizes("softmax", {rows, cols});
    mtk::softmax(stream("softmax"), f32(y, rows * cols, "softmax", "y"),
                 f32(x, rows * cols, "softmax", "x"), rows, cols);
    launched("softmax");
}

}  // namespace moetrain::cuda
