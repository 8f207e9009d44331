// Float64 reference implementation of every op of api/moetrain/device.h, written for clarity:
// plain loops over host vectors, no tiling, no fused tricks. Same argument meaning as the
// Device op (sizes passed explicitly, row-major, "accumulate" = +=, empty vector = empty
// tensor). Backend tests compare device results with these; the backward ops are themselves
// checked against central finite differences of the forward ops (tests/test_ops_reference.cpp).
// Per-element definitions follow MODEL.md; where MODEL.md fixes a float32 computation (the
// RoPE angle, the Philox uniform) the reference uses the shared float32 formula for it.
#pragma once

#include <cstdint>
#include <vector>

#include "moetrain/device.h"

namespace moetrain::ref {

using Vec = std::vector<double>;
using IVec = std::vector<int32_t>;

// ---- memory ----
// The value an f32 becomes after a round trip through `dtype` (f32: itself; bf16/f16: rounded
// to nearest even; i32: truncated toward zero as a C cast; u8: as a C cast of the integer).
double round_to(double v, DType dtype);
// round_to applied to every element.
Vec rounded(Vec v, DType dtype);

// ---- dense algebra ----
struct Gemm {
    Trans ta = Trans::N, tb = Trans::N;
    int64_t m = 0, n = 0, k = 0;
    double alpha = 1, beta = 0;
    int64_t lda = 0, ldb = 0, ldc = 0;
    int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};
// The sizes, scalars and strides of a device GemmArgs (its tensors are not used).
Gemm gemm_dims(const GemmArgs& g);
void gemm(const Gemm& g, const Vec& a, const Vec& b, Vec& c);
// Device::gemm_grouped: group i has rows[i] rows (>= 0, sum <= the capacity g.m / g.k); g's
// batch fields are ignored (the grouped op takes stride_b (dim m) / stride_c (dim k) only).
void gemm_grouped(const Gemm& g, const Vec& a, const Vec& b, Vec& c, const IVec& rows,
                  GroupDim dim);
void add(Vec& out, const Vec& a, const Vec& b, int64_t n);
void axpby(Vec& y, double alpha, const Vec& x, double beta, int64_t n);
void add_bias(Vec& y, const Vec& bias, int64_t rows, int64_t cols);
void bias_grad(Vec& dbias, const Vec& dy, int64_t rows, int64_t cols);

// ---- embedding ----
void embedding_fwd(Vec& out, const Vec& table, const IVec& ids, int64_t n, int64_t dim,
                   bool accumulate);
void embedding_bwd(Vec& dtable, const Vec& dout, const IVec& ids, int64_t n, int64_t dim);

// ---- normalisation ----
void rmsnorm_fwd(Vec& y, Vec& rstd, const Vec& x, const Vec& g, int64_t rows, int64_t dim,
                 double eps);
void rmsnorm_bwd(Vec& dx, Vec& dg, const Vec& dy, const Vec& x, const Vec& g, const Vec& rstd,
                 int64_t rows, int64_t dim, bool accumulate_dx);
void layernorm_fwd(Vec& y, Vec& mean, Vec& rstd, const Vec& x, const Vec& g, const Vec& b,
                   int64_t rows, int64_t dim, double eps);
void layernorm_bwd(Vec& dx, Vec& dg, Vec& db, const Vec& dy, const Vec& x, const Vec& g,
                   const Vec& mean, const Vec& rstd, int64_t rows, int64_t dim, bool accumulate_dx);

// ---- positions ----
void rope(Vec& x, int64_t B, int64_t T, int64_t nh, int64_t hd, double theta, int64_t pos0,
          bool inverse);

// ---- KV cache ----
// cache[b, p + t, :] = rows[b, t, :] (p = the position the op resolves, host + device part).
void kv_append(Vec& cache, const Vec& rows, int64_t B, int64_t T, int64_t S, int64_t row_len,
               int64_t p);

// ---- attention (naive: the full score matrix, in double; d.tk_dev is not read: pass the
// resolved Tk) ----
void attention_fwd(Vec& o, Vec& lse, const Vec& q, const Vec& k, const Vec& v, const AttnDims& d,
                   double scale);
void attention_bwd(Vec& dq, Vec& dk, Vec& dv, const Vec& dout, const Vec& q, const Vec& k,
                   const Vec& v, const AttnDims& d, double scale);

// ---- activations ----
double act(Act a, double z);
double act_grad(Act a, double z);
void act_fwd(Act a, Vec& y, const Vec& x, int64_t n);
void act_bwd(Act a, Vec& dx, const Vec& dy, const Vec& x, int64_t n);
void swiglu_fwd(Vec& h, const Vec& gate, const Vec& up, int64_t n);
void swiglu_bwd(Vec& dgate, Vec& dup, const Vec& dh, const Vec& gate, const Vec& up, int64_t n);
void softmax(Vec& y, const Vec& x, int64_t rows, int64_t cols);

// ---- MoE routing ----
// bias may be empty (no expert bias).
void router_fwd(Vec& probs, Vec& lse, IVec& topk_idx, Vec& topk_w, const Vec& logits,
                const Vec& bias, int64_t N, int64_t E, int64_t k, const RouterArgs& r);
void router_bwd(Vec& dlogits, const Vec& dtopk_w, const Vec& probs, const Vec& lse,
                const Vec& logits, const IVec& topk_idx, const Vec& topk_w, const IVec& counts,
                int64_t N, int64_t E, int64_t k, const RouterArgs& r, double aux_alpha,
                double z_alpha, double scale);
void router_aux_loss(Vec& out, const Vec& probs, const Vec& lse, const IVec& counts, int64_t N,
                     int64_t E, int64_t k, const RouterArgs& r, double aux_alpha, double z_alpha);
void hash_route(IVec& topk_idx, const IVec& ids, int64_t N, int64_t layer, int64_t E);
// offsets may be empty (= 0).
void moe_capacity(IVec& kept_idx, IVec& counts, const IVec& topk_idx, const IVec& offsets,
                  int64_t N, int64_t k, int64_t E, int64_t capacity);
// shares [ranks, k, E] (Device::moe_capacity_shares).
void moe_capacity_shares(IVec& shares, const IVec& topk_idx, int64_t N, int64_t k, int64_t E,
                         int64_t rank, int64_t ranks);
void moe_sort(IVec& counts, IVec& row_token, IVec& slot_row, const IVec& topk_idx, int64_t N,
              int64_t k, int64_t E);
void gather_rows(Vec& dst, const Vec& src, const IVec& index, int64_t R, int64_t dim);
void moe_combine(Vec& y, const Vec& rows, const IVec& slot_row, const Vec& w, int64_t N, int64_t k,
                 int64_t dim, bool accumulate);
void moe_combine_bwd(Vec& drows, Vec& dw, const Vec& dy, const Vec& rows, const IVec& slot_row,
                     const Vec& w, int64_t N, int64_t k, int64_t dim);
void add_counts(IVec& acc, const IVec& counts, int64_t n);
// bias holds the fp32 values (each result is rounded to fp32, as MODEL.md 2 says).
void expert_bias_update(Vec& bias, const IVec& counts, int64_t E, double rate);

// ---- loss ----
// grad (when grad_scale != 0) receives what the device writes over the logits.
void cross_entropy(Vec& losses, Vec& grad, const Vec& logits, const IVec& targets, int64_t N,
                   int64_t V, double grad_scale);

// ---- reductions ----
void sum(Vec& out, const Vec& x, int64_t n, double scale, bool accumulate);
void sum_squares(Vec& out, const Vec& x, int64_t n, bool accumulate);

// ---- optimizers ----
double clip_coef(double gnorm_sq, double grad_scale, double clip);
void adamw(Vec& p, const Vec& g, Vec& m, Vec& v, int64_t n, const AdamWArgs& a, double gnorm_sq,
           double clip, double grad_scale);
void sgd(Vec& p, const Vec& g, int64_t n, double lr, double gnorm_sq, double clip,
         double grad_scale);

// ---- 8-bit AdamW ----
// Entry `code` of the signed (m) / unsigned (v) dynamic map, built the way bitsandbytes'
// create_dynamic_map builds it (group means of linspace(0.1, 1, F + 1) times 10^(i-6), their
// negations when signed, 0 and 1, sorted), in double and rounded to float.
double qmap(bool is_signed, int code);
// The code whose map entry is nearest to x (linear scan; ties to the lower code).
int qmap_nearest(bool is_signed, double x);
// Whether `code` is the nearest code of some value within `slack` of x: what an fp32
// implementation may store for the exact normalised value x (maps are sorted, so the codes of
// [x - slack, x + slack] form one range).
bool code_within_slack(bool is_signed, int code, double x, double slack);

// The op's state on the host, plus what the reference learns about each element.
struct Quantized8 {
    std::vector<uint8_t> m_codes, v_codes;
    Vec m_absmax, v_absmax;
    // Written by adamw8bit: the exact new m / absmax, v / absmax of each element and a bound
    // on how far an fp32 computation of it may stray (16 ulps of the largest term it sums,
    // relative to the block's absmax, plus 16 ulps of the value: the grad factor, the two
    // products and the sum each round once, and so do absmax and the division).
    Vec m_x, v_x, m_slack, v_slack;
};
// Device::adamw8bit in float64 on the float maps above (an element whose v code is 0 gets the
// m code of 0).
void adamw8bit(Vec& p, const Vec& g, Quantized8& s, int64_t n, const AdamWArgs& a, double gnorm_sq,
               double clip, double grad_scale);

// ---- sampling ----
void sample(IVec& out_ids, const Vec& logits, int64_t B, int64_t V, const SampleArgs& s);

}  // namespace moetrain::ref
