// The Device interface: memory plus the smallest op set the MODEL.md transformer needs.
// The model is written once against this class; each backend (cpu, opencl, cuda) implements
// every op (pure virtual: a backend missing an op does not compile). Ops are queued in order
// on the device's stream; download() and synchronize() wait for queued work.
//
// Conventions for every op:
//  - Tensors are views (buffer + element offset); sizes are passed explicitly and the
//    tensors must hold at least that many elements. Row-major everywhere.
//  - Floating tensors are f32 unless an op says otherwise; index tensors are i32.
//  - "accumulate" means out += result; otherwise out = result.
//  - Reductions accumulate in fp32 or wider and are deterministic for a fixed thread count.
//  - Device-side values: a few ops take an optional i32 [1] tensor (rope's pos_dev, kv_append's
//    pos_dev, AttnDims::tk_dev, SampleArgs::step_dev) whose value is added to a host argument
//    when the op runs, so that one recorded step (run_recorded) serves every decode position.
//    The host checks the host arguments at once; a device value that leaves the documented
//    range is reported like an invalid index (cpu: thrown at once; cuda / opencl: the op skips
//    its work and the next download() or synchronize() throws naming the op and the value).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "moetrain/tensor.h"

namespace moetrain {

enum class Trans : uint8_t { N, T };
// Which dimension of a grouped product the row groups split (Device::gemm_grouped).
enum class GroupDim : uint8_t { m, k };
enum class Act : uint8_t { gelu, relu, silu };  // gelu = tanh approximation (MODEL.md 2)

// C = alpha * op(A) @ op(B) + beta * C, row-major; op(A) is [m,k], op(B) is [k,n], C is [m,n].
// lda/ldb/ldc are the row strides of A, B, C as stored. batch > 1: strided-batched, the i-th
// product uses A + i*stride_a, B + i*stride_b, C + i*stride_c (element strides).
// compute (f32, bf16 or f16): every element of op(A) and op(B) is rounded to `compute` (round
// to nearest even, the dtype.h conversions) before it is multiplied; the products are summed
// in fp32 or wider and alpha / beta are applied in fp32. A and B may each be stored as f32 or
// as the 16-bit type of `compute` (a bf16 A with compute f16 is an error; compute f32 needs
// f32 A and B). C is always f32. Sizes, strides and ld are in elements of each operand's dtype.
struct GemmArgs {
    Trans ta = Trans::N, tb = Trans::N;
    int64_t m = 0, n = 0, k = 0;
    float alpha = 1.0f;
    Tensor a;
    int64_t lda = 0;
    Tensor b;
    int64_t ldb = 0;
    float beta = 0.0f;
    Tensor c;
    int64_t ldc = 0;
    int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
    DType compute = DType::f32;
};

// Attention sizes. q/o: [B,Tq,H,hd]; k/v: [B,S,K,hd] (S = capacity >= Tk, batch stride S*K*hd);
// lse: [B,H,Tq]. Query t sits at absolute position t + (Tk - Tq) and attends keys u <= it.
// Query head j uses kv head j / (H/K).
// tk_dev (i32 [1], may be empty) adds a length read from device memory when the op runs (a
// decode step replayed from a graph): the ops use Tk + tk_dev[0], which must lie in [Tq, S]
// (the host checks Tq <= Tk <= S on Tk alone). A device value outside that range is reported
// like an invalid index (see "Device-side values" at the top) and the op skips its work.
struct AttnDims {
    int64_t B = 0, Tq = 0, Tk = 0, S = 0, H = 0, K = 0, hd = 0;
    Tensor tk_dev = {};
};

struct AdamWArgs {
    float lr = 0, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0;
    float bc1 = 1, bc2 = 1;  // bias corrections 1 - b1^s, 1 - b2^s
};

struct SampleArgs {
    float temperature = 0;  // 0 = greedy (argmax, ties to the lower id)
    int64_t top_k = 0;      // 0 = off
    float top_p = 1.0f;     // 1 = off
    uint64_t seed = 0;
    uint64_t step = 0;  // Philox counter = (step, row)
    // i32 [1], may be empty: added to step when the op runs, read as an unsigned 32-bit count
    // (step + uint32(step_dev[0]), modulo 2^64), so a replayed decode step draws a new number.
    Tensor step_dev = {};
};

// How Device::run_recorded ran a step: called record() (eager), captured it into a graph and
// launched that (captured), or launched the graph captured earlier without calling record().
enum class StepRun : uint8_t { eager, captured, replayed };

class Device {
public:
    virtual ~Device() = default;

    // ---- identity ----
    virtual std::string backend_name() const = 0;  // "cpu", "opencl", "cuda"
    virtual std::string name() const = 0;          // human description of the device

    // ---- memory ----
    virtual std::shared_ptr<Buffer> alloc_buffer(size_t bytes) = 0;  // zero-initialised
    Tensor alloc(DType dtype, Shape shape) {
        Tensor t;
        t.buf = alloc_buffer(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
        t.dtype = dtype;
        t.shape = shape;
        return t;
    }
    virtual void upload(const Tensor& dst, const void* src) = 0;    // dst.bytes() from host
    virtual void download(void* dst, const Tensor& src) = 0;        // waits for queued work
    virtual void copy(const Tensor& dst, const Tensor& src) = 0;    // same dtype, dst.numel()
    virtual void fill(const Tensor& dst, float value) = 0;          // any dtype (value cast)
    virtual void convert(const Tensor& dst, const Tensor& src) = 0;  // f32/bf16/f16 casts
    virtual void synchronize() = 0;

    // ---- dense algebra ----
    virtual void gemm(const GemmArgs& g) = 0;
    // Grouped products over consecutive row groups (the MoE experts) whose sizes live on the
    // device. Group i < groups has r_i = group_rows[i] rows (i32, >= 0) starting at row
    // o_i = r_0 + ... + r_{i-1}; sum r_i <= the capacity g.m (dim m) or g.k (dim k), which
    // fixes the work a backend plans for (rows past sum r_i are not touched).
    //  dim m (forward, input gradient): ta must be N, tb N or T; the tensors are A [cap, k],
    //   C [cap, n] and `groups` B matrices B_i = g.b + i * g.stride_b;
    //   C[o_i : o_i+r_i, :] = alpha * A[o_i : o_i+r_i, :] @ op(B_i) + beta * C[o_i : o_i+r_i, :].
    //  dim k (weight gradient): ta must be T, tb N; A [cap, m], B [cap, n] and `groups` C
    //   matrices C_i = g.c + i * g.stride_c [m, n];
    //   C_i = alpha * A[o_i : o_i+r_i, :]^T @ B[o_i : o_i+r_i, :] + beta * C_i (r_i = 0 gives
    //   beta * C_i).
    // compute, dtypes, lda / ldb / ldc and "beta = 0 does not read C" as in gemm(); g.batch
    // must be 1 and the other stride_* 0. Invalid group_rows (negative, sum over the capacity)
    // are an error: thrown at once where group_rows is read on the host (cpu, opencl), else
    // (cuda) reported at the next download() / synchronize() with the groups clamped to the
    // capacity. Backends that support graph capture (cuda) issue no host synchronisation.
    virtual void gemm_grouped(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                              GroupDim dim) = 0;
    // out[i] = a[i] + b[i], i < n (out may alias a or b).
    virtual void add(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) = 0;
    // y[i] = alpha * x[i] + beta * y[i], i < n.
    virtual void axpby(const Tensor& y, float alpha, const Tensor& x, float beta, int64_t n) = 0;
    // y[r, c] += bias[c] for r < rows, c < cols.
    virtual void add_bias(const Tensor& y, const Tensor& bias, int64_t rows, int64_t cols) = 0;
    // dbias[c] += sum_r dy[r, c].
    virtual void bias_grad(const Tensor& dbias, const Tensor& dy, int64_t rows, int64_t cols) = 0;

    // ---- embedding ----
    // out[i, :] (+)= table[ids[i], :] for i < n; ids are i32 already validated (< rows of table).
    virtual void embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids,
                               int64_t n, int64_t dim, bool accumulate) = 0;
    // dtable[ids[i], :] += dout[i, :] for i < n (duplicates summed deterministically).
    virtual void embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                               int64_t n, int64_t dim) = 0;

    // ---- normalisation (MODEL.md 2; rows of length dim) ----
    // y = x * rstd * g, rstd[r] = 1/sqrt(mean(x^2) + eps).
    virtual void rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x,
                             const Tensor& g, int64_t rows, int64_t dim, float eps) = 0;
    // dx (+)= d/dx, dg += d/dg, from dy and the saved x, rstd.
    virtual void rmsnorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& dy,
                             const Tensor& x, const Tensor& g, const Tensor& rstd, int64_t rows,
                             int64_t dim, bool accumulate_dx) = 0;
    // y = (x - mean) * rstd * g + b (b may be empty), biased variance.
    virtual void layernorm_fwd(const Tensor& y, const Tensor& mean, const Tensor& rstd,
                               const Tensor& x, const Tensor& g, const Tensor& b, int64_t rows,
                               int64_t dim, float eps) = 0;
    // dx (+)= ..., dg += ..., db += ... (db may be empty).
    virtual void layernorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& db,
                               const Tensor& dy, const Tensor& x, const Tensor& g,
                               const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t dim,
                               bool accumulate_dx) = 0;

    // ---- positions ----
    // In-place half-split RoPE on x[B,T,nh,hd]; row t has position p + t with p = pos0 +
    // pos_dev[0] (pos_dev: i32 [1] or empty = 0; every position must lie in [0, 2^30)); theta
    // is the already NTK-adjusted base. inverse = rotate by -angle (the backward pass).
    virtual void rope(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
                      int64_t pos0, const Tensor& pos_dev, bool inverse) = 0;

    // ---- KV cache ----
    // cache[b, p + t, :] = rows[b, t, :] for b < B, t < T, with p = pos0 + pos_dev[0] (pos_dev:
    // i32 [1] or empty = 0); cache is [B, S, row_len], rows [B, T, row_len], both of one dtype
    // (any). Needs 0 <= p and p + T <= S (pos0 + T <= S is checked on the host).
    virtual void kv_append(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T,
                           int64_t S, int64_t row_len, int64_t pos0, const Tensor& pos_dev) = 0;

    // ---- attention (causal, flash-style: no Tq x Tk matrix is kept) ----
    virtual void attention_fwd(const Tensor& o, const Tensor& lse, const Tensor& q,
                               const Tensor& k, const Tensor& v, const AttnDims& d,
                               float scale) = 0;
    // dq, dk, dv are overwritten (dk/dv shaped like k/v, rows >= Tk zeroed).
    virtual void attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                               const Tensor& dout, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& o, const Tensor& lse,
                               const AttnDims& d, float scale) = 0;

    // ---- activations ----
    virtual void act_fwd(Act act, const Tensor& y, const Tensor& x, int64_t n) = 0;
    // dx = dy * act'(x).
    virtual void act_bwd(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x,
                         int64_t n) = 0;
    // h = silu(gate) * up.
    virtual void swiglu_fwd(const Tensor& h, const Tensor& gate, const Tensor& up,
                            int64_t n) = 0;
    virtual void swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                            const Tensor& gate, const Tensor& up, int64_t n) = 0;
    // Row-wise stable softmax, y may alias x.
    virtual void softmax(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) = 0;

    // ---- MoE routing (MODEL.md 2-3) ----
    // probs = softmax(logits) [N,E], lse[N] = logsumexp(logits); topk_idx/topk_w [N,k]: the k
    // largest probs (ties: lower index first) in descending order, weights renormalised when
    // norm_topk.
    virtual void router_fwd(const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                            const Tensor& topk_w, const Tensor& logits, int64_t N, int64_t E,
                            int64_t k, bool norm_topk) = 0;
    // dlogits = d/dlogits of [sum dtopk_w * topk_w + scale*(aux + z)] with f_e = counts[e]/(N k)
    // held constant: aux = aux_alpha * E * sum_e f_e * mean_n p[n,e]; z = z_alpha * mean lse^2.
    virtual void router_bwd(const Tensor& dlogits, const Tensor& dtopk_w, const Tensor& probs,
                            const Tensor& lse, const Tensor& topk_idx, const Tensor& topk_w,
                            const Tensor& counts, int64_t N, int64_t E, int64_t k,
                            bool norm_topk, float aux_alpha, float z_alpha, float scale) = 0;
    // out[0] += aux, out[1] += z (the two loss terms of one MoE layer, definitions above).
    virtual void router_aux_loss(const Tensor& out, const Tensor& probs, const Tensor& lse,
                                 const Tensor& counts, int64_t N, int64_t E, int64_t k,
                                 float aux_alpha, float z_alpha) = 0;
    // topk_idx[n] = mix32(ids[n] + 0x9E3779B9 * (layer + 1)) mod E.
    virtual void hash_route(const Tensor& topk_idx, const Tensor& ids, int64_t N, int64_t layer,
                            int64_t E) = 0;
    // Stable counting sort of the N*k slots by expert: counts[E]; row_token[r] = token of
    // sorted row r (experts contiguous in order, within an expert by slot order n*k+j);
    // slot_row[n*k+j] = sorted row of slot (n, j).
    virtual void moe_sort(const Tensor& counts, const Tensor& row_token, const Tensor& slot_row,
                          const Tensor& topk_idx, int64_t N, int64_t k, int64_t E) = 0;
    // dst[r, :] = src[index[r], :] for r < R.
    virtual void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& index, int64_t R,
                             int64_t dim) = 0;
    // y[n] (+)= sum_j w[n,j] * rows[slot_row[n*k+j]] (w empty = all 1). Also the backward of
    // the token permutation (w empty, accumulate).
    virtual void moe_combine(const Tensor& y, const Tensor& rows, const Tensor& slot_row,
                             const Tensor& w, int64_t N, int64_t k, int64_t dim,
                             bool accumulate) = 0;
    // drows[slot_row[n,j]] = w[n,j] * dy[n]; dw[n,j] = dy[n] . rows[slot_row[n,j]] (dw may be
    // empty; w empty = all 1).
    virtual void moe_combine_bwd(const Tensor& drows, const Tensor& dw, const Tensor& dy,
                                 const Tensor& rows, const Tensor& slot_row, const Tensor& w,
                                 int64_t N, int64_t k, int64_t dim) = 0;

    // ---- loss ----
    // losses[n] = -log softmax(logits[n])[targets[n]] (0 where target = -1). If grad_scale != 0
    // the logits are overwritten by grad_scale * (softmax - onehot) (zero rows for ignored).
    virtual void cross_entropy(const Tensor& losses, const Tensor& logits, const Tensor& targets,
                               int64_t N, int64_t V, float grad_scale) = 0;

    // ---- reductions (out is a 1-element view) ----
    // out (+)= scale * sum_i x[i].
    virtual void sum(const Tensor& out, const Tensor& x, int64_t n, float scale,
                     bool accumulate) = 0;
    // out (+)= sum_i x[i]^2.
    virtual void sum_squares(const Tensor& out, const Tensor& x, int64_t n, bool accumulate) = 0;

    // ---- optimizers (MODEL.md 4) ----
    // g' = g * grad_scale * c, c = clip/(norm+1e-6) if clip > 0 and norm > clip else 1, where
    // norm = sqrt(gnorm_sq[0]) * grad_scale; then the AdamW update of p, m, v (n elements).
    virtual void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                       int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                       float grad_scale) = 0;
    // AdamW with 8-bit moments (backends/shared/mt_math.h, docs/OPS.md): m_codes / v_codes [n]
    // (u8) index the signed / unsigned dynamic maps, m_absmax / v_absmax [ceil(n/256)] (f32)
    // scale each block of 256 consecutive elements, counted from the first element of this
    // call (a state buffer belongs to one call range). Per block: m = map[code] * absmax,
    // the adamw update of p, m, v in fp32 (g' as for adamw), then absmax = max |m| of the
    // block and each code = the nearest map entry to m / absmax (ties to the lower code; the
    // code of 0 when absmax is 0); the same for v, and m gets the code of 0 wherever v's code
    // is 0 (no m without v). Zero-filled state is the zero moment.
    virtual void adamw8bit(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                           const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                           int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                           float grad_scale) = 0;
    // p -= lr * g' (g' as for adamw).
    virtual void sgd(const Tensor& p, const Tensor& g, int64_t n, float lr,
                     const Tensor& gnorm_sq, float clip, float grad_scale) = 0;

    // ---- recorded steps (CUDA Graphs) ----
    // Runs `record`, a function that only queues ops of this device: no upload, download,
    // synchronize or allocation inside, no host-side state it must update, and exactly the
    // same ops with the same arguments (tensors, sizes, scalars) every time it is called with
    // this `key` (the caller encodes whatever would change them in the key). A backend that
    // can record work (cuda with graphs on) runs it eagerly for its warm-up calls, then
    // captures it into a graph and from then on replays the graph instead of calling `record`;
    // a record that breaks the rules cannot be captured and keeps running eagerly (said once
    // on stderr). The results are the same either way. Other backends just call record().
    virtual StepRun run_recorded(const std::string& key, const std::function<void()>& record) {
        (void)key;
        record();
        return StepRun::eager;
    }

    // ---- sampling (MODEL.md 7) ----
    // out_ids[b] = token drawn from logits[b, :V]; logits may be used as scratch.
    virtual void sample(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                        const SampleArgs& s) = 0;
};

}  // namespace moetrain
