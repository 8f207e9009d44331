// A Device decorator that times every op of any backend (synchronising after each) and counts
// its FLOPs and bytes, for `moetrain bench --profile`. Works for every backend because it only
// forwards through the Device interface.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "moetrain/device.h"

namespace moetrain {

struct OpProfile {
    std::string op;
    int64_t calls = 0;
    double seconds = 0;
    double flops = 0;  // arithmetic (GEMM: 2mnk)
    double bytes = 0;  // estimated bytes read + written
};

class ProfilingDevice : public Device {
public:
    explicit ProfilingDevice(Device& inner) : inner_(inner) {}
    void reset() { table_.clear(); }
    std::vector<OpProfile> table() const;  // sorted by time, descending

    std::string backend_name() const override { return inner_.backend_name(); }
    std::string name() const override { return inner_.name(); }
    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override {
        return inner_.alloc_buffer(bytes);
    }
    void upload(const Tensor& dst, const void* src) override;
    void download(void* dst, const Tensor& src) override;
    void copy(const Tensor& dst, const Tensor& src) override;
    void fill(const Tensor& dst, float value) override;
    void convert(const Tensor& dst, const Tensor& src) override;
    void synchronize() override { inner_.synchronize(); }

    void gemm(const GemmArgs& g) override;
    void gemm_grouped(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                      GroupDim dim) override;
    void add(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) override;
    void axpby(const Tensor& y, float alpha, const Tensor& x, float beta, int64_t n) override;
    void add_bias(const Tensor& y, const Tensor& bias, int64_t rows, int64_t cols) override;
    void bias_grad(const Tensor& dbias, const Tensor& dy, int64_t rows, int64_t cols) override;
    void embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids, int64_t n,
                       int64_t dim, bool accumulate) override;
    void embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t n,
                       int64_t dim) override;
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
    void rope(const Tensor& x, int64_t B, int64_t T, int64_t nh, int64_t hd, float theta,
              int64_t pos0, const Tensor& pos_dev, bool inverse) override;
    void kv_append(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T, int64_t S,
                   int64_t row_len, int64_t pos0, const Tensor& pos_dev) override;
    void attention_fwd(const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, const AttnDims& d, float scale) override;
    void attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                       const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                       const Tensor& lse, const AttnDims& d, float scale) override;
    void act_fwd(Act act, const Tensor& y, const Tensor& x, int64_t n) override;
    void act_bwd(Act act, const Tensor& dx, const Tensor& dy, const Tensor& x,
                 int64_t n) override;
    void swiglu_fwd(const Tensor& h, const Tensor& gate, const Tensor& up, int64_t n) override;
    void swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                    const Tensor& up, int64_t n) override;
    void softmax(const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) override;
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
    void moe_combine(const Tensor& y, const Tensor& rows, const Tensor& slot_row,
                     const Tensor& w, int64_t N, int64_t k, int64_t dim, bool accumulate) override;
    void moe_combine_bwd(const Tensor& drows, const Tensor& dw, const Tensor& dy,
                         const Tensor& rows, const Tensor& slot_row, const Tensor& w, int64_t N,
                         int64_t k, int64_t dim) override;
    void cross_entropy(const Tensor& losses, const Tensor& logits, const Tensor& targets,
                       int64_t N, int64_t V, float grad_scale) override;
    void sum(const Tensor& out, const Tensor& x, int64_t n, float scale, bool accumulate) override;
    void sum_squares(const Tensor& out, const Tensor& x, int64_t n, bool accumulate) override;
    void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, int64_t n,
               const AdamWArgs& a, const Tensor& gnorm_sq, float clip, float grad_scale) override;
    void adamw8bit(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                   const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                   int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                   float grad_scale) override;
    void sgd(const Tensor& p, const Tensor& g, int64_t n, float lr, const Tensor& gnorm_sq,
             float clip, float grad_scale) override;
    void sample(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                const SampleArgs& s) override;

private:
    // Runs fn, synchronises, and books the time under `op`.
    template <typename Fn>
    void timed(const char* op, double flops, double bytes, Fn&& fn);
    // t[0] of a device-side value argument (device.h), 0 when t is empty.
    int64_t device_value(const Tensor& t);

    Device& inner_;
    std::map<std::string, OpProfile> table_;
};

}  // namespace moetrain
