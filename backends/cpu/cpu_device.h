// The CPU Device: host memory (64-byte aligned, zeroed) and every op of api/moetrain/device.h
// as OpenMP loops, with every matrix product through the GEMM library (cpu_gemm.cpp).
// The ops are split by family over cpu_*.cpp; this header declares them all and holds the
// argument checks that turn a wrong tensor into a moetrain::Error naming the op and argument.
//
// Determinism: work is split into fixed pieces (rows, or fixed-size chunks) that do not depend
// on the thread count, and partial sums are combined in a fixed order, so results are
// bit-identical run to run (and, apart from the GEMM library, across thread counts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "moetrain/device.h"

namespace moetrain {

// One host allocation, aligned to 64 bytes and zero-filled.
class CpuBuffer : public Buffer {
public:
    CpuBuffer(Device* device, size_t bytes);
    ~CpuBuffer() override;
    void* data() const { return data_; }

private:
    void* data_ = nullptr;
};

class CpuDevice : public Device {
public:
    CpuDevice(std::string name, int threads);

    std::string backend_name() const override { return "cpu"; }
    std::string name() const override { return name_; }
    int threads() const { return threads_; }

    // ---- memory (cpu_memory.cpp) ----
    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override;
    void upload(const Tensor& dst, const void* src) override;
    void download(void* dst, const Tensor& src) override;
    void copy(const Tensor& dst, const Tensor& src) override;
    void fill(const Tensor& dst, float value) override;
    void convert(const Tensor& dst, const Tensor& src) override;
    void synchronize() override {}

    // ---- dense algebra (cpu_gemm.cpp, cpu_elementwise.cpp) ----
    void gemm(const GemmArgs& g) override;
    void gemm_grouped(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                      GroupDim dim) override;  // cpu_gemm_grouped.cpp
    void add(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) override;
    void axpby(const Tensor& y, float alpha, const Tensor& x, float beta, int64_t n) override;
    void add_bias(const Tensor& y, const Tensor& bias, int64_t rows, int64_t cols) override;
    void bias_grad(const Tensor& dbias, const Tensor& dy, int64_t rows, int64_t cols) override;

    // ---- embedding (cpu_embedding.cpp) ----
    void embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids, int64_t n,
                       int64_t dim, bool accumulate) override;
    void embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t n,
                       int64_t dim) override;

    // ---- normalisation (cpu_norm.cpp) ----
    void rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& g,
                     int64_t rows, int64_t dim, float eps) override;
    void rmsnorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& dy, const Tensor& x,
                     const Tensor& g, const Tensor& rstd, int64_t rows, int64_t dim,
                     bool accumulate_dx) override;
    void layernorm_fwd(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& g, const Tensor& b, int64_t rows, int64_t dim,
                       float eps) override;
    void layernorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& db, const Tensor& dy,
                       const Tensor& x, const Tensor& g, const Tensor& mean, const Tensor& rstd,
                       int64_t rows, int64_t dim, bool accumulate_dx) override;

    // ---- positions and the KV cache (cpu_rope.cpp, cpu_kv_cache.cpp) ----
    void rope(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
              int64_t pos0, const Tensor& pos_dev, bool inverse) override;
    void kv_append(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T, int64_t S,
                   int64_t row_len, int64_t pos0, const Tensor& pos_dev) override;

    // ---- attention (cpu_attention.cpp) ----
    void attention_fwd(const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, const AttnDims& d, float scale) override;
    void attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                       const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                       const Tensor& lse, const AttnDims& d, float scale) override;

    // ---- activations (cpu_activations.cpp) ----
    void act_fwd(Act act, const Tensor& y, const Tensor& x, int64_t n) override;
    void act_bwd(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x,
                 int64_t n) override;
    void swiglu_fwd(const Tensor& h, const Tensor& gate, const Tensor& up, int64_t n) override;
    void swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                    const Tensor& up, int64_t n) override;
    void softmax(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) override;

    // ---- MoE routing (cpu_router.cpp, cpu_moe_permute.cpp) ----
    void router_fwd(const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                    const Tensor& topk_w, const Tensor& logits, int64_t N, int64_t E, int64_t k,
                    bool norm_topk) override;
    void router_bwd(const Tensor& dlogits, const Tensor& dtopk_w, const Tensor& probs,
                    const Tensor& lse, const Tensor& topk_idx, const Tensor& topk_w,
                    const Tensor& counts, int64_t N, int64_t E, int64_t k, bool norm_topk,
                    float aux_alpha, float z_alpha, float scale) override;
    void router_aux_loss(const Tensor& out, const Tensor& probs, const Tensor& lse,
                         const Tensor& counts, int64_t N, int64_t E, int64_t k, float aux_alpha,
                         float z_alpha) override;
    void hash_route(const Tensor& topk_idx, const Tensor& ids, int64_t N, int64_t layer,
                    int64_t E) override;
    void moe_sort(const Tensor& counts, const Tensor& row_token, const Tensor& slot_row,
                  const Tensor& topk_idx, int64_t N, int64_t k, int64_t E) override;
    void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& index, int64_t R,
                     int64_t dim) override;
    void moe_combine(const Tensor& y, const Tensor& rows, const Tensor& slot_row, const Tensor& w,
                     int64_t N, int64_t k, int64_t dim, bool accumulate) override;
    void moe_combine_bwd(const Tensor& drows, const Tensor& dw, const Tensor& dy,
                         const Tensor& rows, const Tensor& slot_row, const Tensor& w, int64_t N,
                         int64_t k, int64_t dim) override;

    // ---- loss (cpu_loss.cpp) ----
    void cross_entropy(const Tensor& losses, const Tensor& logits, const Tensor& targets,
                       int64_t N, int64_t V, float grad_scale) override;

    // ---- reductions (cpu_reduce.cpp) ----
    void sum(const Tensor& out, const Tensor& x, int64_t n, float scale, bool accumulate) override;
    void sum_squares(const Tensor& out, const Tensor& x, int64_t n, bool accumulate) override;

    // ---- optimizers (cpu_optimizer.cpp, cpu_optimizer8.cpp) ----
    void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, int64_t n,
               const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
               float grad_scale) override;
    void adamw8bit(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                   const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                   int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                   float grad_scale) override;
    void sgd(const Tensor& p, const Tensor& g, int64_t n, float lr, const Tensor& gnorm_sq,
             float clip, float grad_scale) override;

    // ---- sampling (cpu_sample.cpp) ----
    void sample(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                const SampleArgs& s) override;

    // ---- argument checks shared by the op files ----
    // Host pointer to the first element of t, after checking that t lives on this device, has
    // the dtype and holds at least n elements. n == 0 accepts an empty tensor (nullptr).
    float* f32(const Tensor& t, int64_t n, const char* op, const char* arg) const;
    int32_t* i32(const Tensor& t, int64_t n, const char* op, const char* arg) const;
    // Like f32/i32 but an empty tensor is allowed and gives nullptr ("may be empty" arguments).
    float* f32_opt(const Tensor& t, int64_t n, const char* op, const char* arg) const;
    // Raw pointer (any dtype) after the device check.
    void* raw(const Tensor& t, const char* op, const char* arg) const;
    // The value of a "device-side value" argument (device.h): t[0] of an i32 [1] tensor, 0 when
    // t is empty.
    int64_t device_value(const Tensor& t, const char* op, const char* arg) const {
        return t.buf ? *i32(t, 1, op, arg) : 0;
    }

    // Temporary memory of an op (at least `floats` floats, 64-byte aligned, contents
    // undefined), valid until the next call. It only grows, so once the first training step
    // has run the ops allocate nothing.
    float* scratch(size_t floats);
    double* scratch_f64(int64_t doubles) {
        return reinterpret_cast<double*>(scratch(2 * static_cast<size_t>(doubles)));
    }

private:
    void* checked(const Tensor& t, DType dtype, int64_t n, const char* op, const char* arg) const;

    std::string name_;
    int threads_;
    std::unique_ptr<CpuBuffer> scratch_;
};

// Non-negative size check shared by the op files: throws naming the op and the size.
void check_sizes(const char* op, std::initializer_list<int64_t> sizes);

}  // namespace moetrain
