// CUDA ops: GEMM (cuBLAS), element-wise algebra, embedding, normalisation, RoPE, the KV-cache
// append, attention and activations. Each op checks its tensors, calls the kernel launcher of
// kernels_cuda/ops.h on the device stream and checks the launch.
#include <climits>

#include "cuda/cublas_calls.h"
#include "cuda/cuda_device.h"
#include "launch.h"
#include "shared/gemm_dtypes.h"

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
void CudaDevice::gemm_impl(const GemmArgs& g) {
    const int64_t a_rows = g.ta == Trans::N ? g.m : g.k, a_cols = g.ta == Trans::N ? g.k : g.m;
    const int64_t b_rows = g.tb == Trans::N ? g.k : g.n, b_cols = g.tb == Trans::N ? g.n : g.k;
    if (g.m == 0 || g.n == 0) return;
    const int64_t na = span(g.batch, g.stride_a, a_rows, a_cols, g.lda);
    const int64_t nb = span(g.batch, g.stride_b, b_rows, b_cols, g.ldb);
    float* c = f32(g.c);
    if (g.compute == DType::f32) {
        const float* a = f32(g.a);
        const float* b = f32(g.b);
        stream("gemm");
        gemm_strided(context().cublas(), g, a, b, c);
        return;
    }
    const void* a = raw(g.a);
    const void* b = raw(g.b);
    const auto kind = static_cast<mtk::FloatKind>(g.compute);
    // 256-byte aligned parts of the scratch for the operands that need converting.
    auto part = [](bool f32, int64_t n) {
        return f32 ? (static_cast<size_t>(n) * 2 + 255) / 256 * 256 : 0;
    };
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

void CudaDevice::add_impl(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) {
    mtk::add(stream("add"), f32(out), f32(a), f32(b), n);
    launched("add");
}

void CudaDevice::axpby_impl(const Tensor& y, float alpha, const Tensor& x, float beta, int64_t n) {
    mtk::axpby(stream("axpby"), f32(y), alpha, f32(x), beta, n);
    launched("axpby");
}

void CudaDevice::add_bias_impl(const Tensor& y, const Tensor& bias, int64_t rows, int64_t cols) {
    mtk::add_bias(stream("add_bias"), f32(y), f32(bias), rows, cols);
    launched("add_bias");
}

void CudaDevice::bias_grad_impl(const Tensor& dbias, const Tensor& dy, int64_t rows, int64_t cols) {
    float* db = f32(dbias);
    const float* d = f32(dy);
    auto* scratch = static_cast<float*>(context().scratch(mtk::colsum_scratch_bytes(rows, cols)));
    mtk::bias_grad(stream("bias_grad"), db, d, rows, cols, scratch);
    launched("bias_grad");
}

void CudaDevice::embedding_fwd_impl(const Tensor& out, const Tensor& table, const Tensor& ids,
                                    int64_t n, int64_t dim, bool accumulate) {
    mtk::embedding_fwd(stream("embedding_fwd"), f32(out), f32(table), table.numel() / dim, i32(ids),
                       n, dim, accumulate, error_word());
    launched("embedding_fwd");
}

void CudaDevice::embedding_bwd_impl(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                    int64_t n, int64_t dim) {
    mtk::embedding_bwd(stream("embedding_bwd"), f32(dtable), dtable.numel() / dim, f32(dout),
                       i32(ids), n, dim, error_word());
    launched("embedding_bwd");
}

void CudaDevice::rmsnorm_fwd_impl(const Tensor& y, const Tensor& rstd, const Tensor& x,
                                  const Tensor& g, int64_t rows, int64_t dim, float eps) {
    const char* op = "rmsnorm_fwd";
    mtk::rmsnorm_fwd(stream(op), f32(y), f32(rstd), f32(x), f32(g), rows, dim, eps);
    launched(op);
}

void CudaDevice::rmsnorm_bwd_impl(const Tensor& dx, const Tensor& dg, const Tensor& dy,
                                  const Tensor& x, const Tensor& g, const Tensor& rstd,
                                  int64_t rows, int64_t dim, bool accumulate_dx) {
    const char* op = "rmsnorm_bwd";
    const auto [pdx, pdg, pdy, px, pg, pr] = f32s(dx, dg, dy, x, g, rstd);
    auto* scratch = static_cast<float*>(context().scratch(mtk::colsum_scratch_bytes(rows, dim)));
    mtk::rmsnorm_bwd(stream(op), pdx, pdg, pdy, px, pg, pr, rows, dim, accumulate_dx, scratch);
    launched(op);
}

void CudaDevice::layernorm_fwd_impl(const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& x, const Tensor& g, const Tensor& b, int64_t rows,
                                    int64_t dim, float eps) {
    const char* op = "layernorm_fwd";
    mtk::layernorm_fwd(stream(op), f32(y), f32(mean), f32(rstd), f32(x), f32(g), f32(b), rows, dim,
                       eps);
    launched(op);
}

void CudaDevice::layernorm_bwd_impl(const Tensor& dx, const Tensor& dg, const Tensor& db,
                                    const Tensor& dy, const Tensor& x, const Tensor& g,
                                    const Tensor& mean, const Tensor& rstd, int64_t rows,
                                    int64_t dim, bool accumulate_dx) {
    const char* op = "layernorm_bwd";
    const auto [pdx, pdg, pdb, pdy, px, pg, pm, pr] = f32s(dx, dg, db, dy, x, g, mean, rstd);
    auto* scratch = static_cast<float*>(context().scratch(mtk::colsum_scratch_bytes(rows, dim)));
    mtk::layernorm_bwd(stream(op), pdx, pdg, pdb, pdy, px, pg, pm, pr, rows, dim, accumulate_dx,
                       scratch);
    launched(op);
}

void CudaDevice::rope_impl(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd,
                           float theta, int64_t pos0, const Tensor& pos_dev, bool inverse) {
    MT_CHECK(pos0 + T <= INT_MAX, "rope: position ", pos0 + T, " too large");
    float* px = f32(x);
    const int32_t* pd = device_value(pos_dev);
    mtk::rope(stream("rope"), px, B, T, nh, hd, theta, pos0, pd, inverse, error_word());
    launched("rope");
}

void CudaDevice::kv_append_impl(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T,
                                int64_t S, int64_t row_len, int64_t pos0, const Tensor& pos_dev) {
    const char* op = "kv_append";
    void* dst = raw(cache);
    const void* src = raw(rows);
    const int32_t* pd = device_value(pos_dev);
    mtk::kv_append(stream(op), dst, src, static_cast<int>(dtype_size(cache.dtype)), B, T, S,
                   row_len, pos0, pd, error_word());
    launched(op);
}

namespace {
mtk::AttnShape checked_shape(const AttnDims& d, const char* op) {
    MT_CHECK(d.hd > 0 && d.hd <= mtk::kMaxHeadDim, op, ": head_dim ", d.hd, " outside 1..",
             mtk::kMaxHeadDim, " (the CUDA attention kernels' limit)");
    MT_CHECK(d.H <= 65535 && d.B <= 65535, op, ": batch ", d.B, " / heads ", d.H,
             " exceed the CUDA grid limit 65535");
    return {d.B, d.Tq, d.Tk, d.S, d.H, d.K, d.hd, nullptr, nullptr};
}
}  // namespace

void CudaDevice::attention_fwd_impl(const Tensor& o, const Tensor& lse, const Tensor& q,
                                    const Tensor& k, const Tensor& v, const AttnDims& d,
                                    float scale) {
    const char* op = "attention_fwd";
    mtk::AttnShape s = checked_shape(d, op);
    s.tk_dev = device_value(d.tk_dev);
    s.err = error_word();
    mtk::attention_fwd(stream(op), f32(o), f32(lse), f32(q), f32(k), f32(v), s, scale);
    launched(op);
}

void CudaDevice::attention_bwd_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                    const Tensor& dout, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor& o, const Tensor& lse,
                                    const AttnDims& d, float scale) {
    const char* op = "attention_bwd";
    mtk::AttnShape s = checked_shape(d, op);
    s.tk_dev = device_value(d.tk_dev);
    s.err = error_word();
    const auto [pdq, pdk, pdv, pdo, pq, pk, pv, po, pl] = f32s(dq, dk, dv, dout, q, k, v, o, lse);
    auto* scratch =
        static_cast<float*>(context().scratch(mtk::attn_bwd_scratch_bytes(d.B, d.H, d.Tq)));
    mtk::attention_bwd(stream(op), pdq, pdk, pdv, pdo, pq, pk, pv, po, pl, s, scale, scratch);
    launched(op);
}

void CudaDevice::act_fwd_impl(Act act, const Tensor& y, const Tensor& x, int64_t n) {
    mtk::act_fwd(stream("act_fwd"), static_cast<mtk::ActKind>(act), f32(y), f32(x), n);
    launched("act_fwd");
}

void CudaDevice::act_bwd_impl(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x,
                              int64_t n) {
    mtk::act_bwd(stream("act_bwd"), static_cast<mtk::ActKind>(act), f32(dx), f32(dy), f32(x), n);
    launched("act_bwd");
}

void CudaDevice::swiglu_fwd_impl(const Tensor& h, const Tensor& gate, const Tensor& up, int64_t n) {
    mtk::swiglu_fwd(stream("swiglu_fwd"), f32(h), f32(gate), f32(up), n);
    launched("swiglu_fwd");
}

void CudaDevice::swiglu_bwd_impl(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                                 const Tensor& gate, const Tensor& up, int64_t n) {
    const char* op = "swiglu_bwd";
    mtk::swiglu_bwd(stream(op), f32(dgate), f32(dup), f32(dh), f32(gate), f32(up), n);
    launched(op);
}

void CudaDevice::softmax_impl(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
    mtk::softmax(stream("softmax"), f32(y), f32(x), rows, cols);
    launched("softmax");
}

}  // namespace moetrain::cuda
