// The CUDA Device: every op of api/moetrain/device.h on one GPU, with the kernels of
// kernels_cuda/ (through the launchers declared in kernels_cuda/ops.h) and cuBLAS for every
// matrix product (cublas_calls.cpp). All work is queued on the context's single stream; only
// download() and synchronize() wait. Memory comes from the caching allocator, op temporaries
// from the context's scratch area, so a warmed-up step never calls cudaMalloc.
// The ops are split by family over cuda_ops_*.cpp; this header declares them all and the
// argument checks that turn a wrong tensor into a moetrain::Error naming the op and argument.
//
// Index values (token ids, targets, expert indices) are checked by the kernels, which skip an
// invalid one and report it into the context's error word. cross_entropy checks the word at
// once (except inside a graph capture); every other op's report (moe_sort's and gemm_grouped's
// included, so that an MoE layer queues no host wait) surfaces at the next download() or
// synchronize(), as a moetrain::Error naming the op and the index.
// run_recorded captures a step into a CUDA Graph and replays it (graph_cache.h) unless the
// device was opened with DeviceOptions::cuda_graphs off.
#pragma once

#include <memory>
#include <string>

#include "cuda/caching_allocator.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_graph_runtime.h"
#include "cuda/graph_cache.h"
#include "moetrain/backend.h"
#include "ops.h"

// The backend's name ("cuda"; the test build of these sources with the SIMT harness standing in
// for the GPU, tests/simt, is "cudasim").
#ifndef MOETRAIN_CUDA_BACKEND_NAME
#define MOETRAIN_CUDA_BACKEND_NAME "cuda"
#endif

namespace moetrain::cuda {

// Opens CUDA device `index` (already checked to exist and be usable).
std::unique_ptr<Device> create_cuda_device(int index, const DeviceOptions& opts);

// One device allocation from the caching allocator (returned to its free list on destruction;
// the allocator outlives the device if buffers do).
class CudaBuffer final : public Buffer {
public:
    CudaBuffer(Device* dev, size_t bytes, std::shared_ptr<CachingAllocator> alloc)
        : Buffer(dev, bytes), alloc_(std::move(alloc)), ptr_(alloc_->allocate(bytes)) {}
    ~CudaBuffer() override { alloc_->free(ptr_); }
    void* data() const { return ptr_; }

private:
    std::shared_ptr<CachingAllocator> alloc_;
    void* ptr_;
};

class CudaDevice final : public Device {
public:
    CudaDevice(int index, std::string name, bool graphs);

    std::string backend_name() const override { return MOETRAIN_CUDA_BACKEND_NAME; }
    std::string name() const override { return name_; }

    // ---- memory (cuda_device.cpp) ----
    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override;
    void upload(const Tensor& dst, const void* src) override;
    void download(void* dst, const Tensor& src) override;
    void copy(const Tensor& dst, const Tensor& src) override;
    void fill(const Tensor& dst, float value) override;
    void convert(const Tensor& dst, const Tensor& src) override;
    void synchronize() override;

    // ---- dense algebra (cuda_ops_dense.cpp; gemm through cublas_calls.cpp) ----
    void gemm(const GemmArgs& g) override;
    // No host synchronisation: sized by the capacity (cuda_ops_grouped.cpp).
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

    // ---- MoE, loss, reductions, optimizers, sampling (cuda_ops_train.cpp) ----
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
    void cross_entropy(const Tensor& losses, const Tensor& logits, const Tensor& targets,
                       int64_t N, int64_t V, float grad_scale) override;
    void sum(const Tensor& out, const Tensor& x, int64_t n, float scale, bool accumulate) override;
    void sum_squares(const Tensor& out, const Tensor& x, int64_t n, bool accumulate) override;
    void adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, int64_t n,
               const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
               float grad_scale) override;
    void adamw8bit(const Tensor& p, const Tensor& g, const Tensor& m_codes,
                   const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                   int64_t n, const AdamWArgs& a, const Tensor& gnorm_sq, float clip,
                   float grad_scale) override;
    void sgd(const Tensor& p, const Tensor& g, int64_t n, float lr, const Tensor& gnorm_sq,
             float clip, float grad_scale) override;
    void sample(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                const SampleArgs& s) override;

    // ---- recorded steps: CUDA Graphs through the graph cache (cuda_device.cpp) ----
    StepRun run_recorded(const std::string& key, const std::function<void()>& record) override;
    const GraphCache& graph_cache() const { return graphs_; }

    // ---- shared by the op files ----
    // Device pointer to t's first element after checking that t lives on this device, has the
    // dtype and holds at least n elements. n == 0 accepts an empty tensor (nullptr).
    float* f32(const Tensor& t, int64_t n, const char* op, const char* arg);
    int32_t* i32(const Tensor& t, int64_t n, const char* op, const char* arg);
    // Like f32 but an empty tensor is allowed and gives nullptr.
    float* f32_opt(const Tensor& t, int64_t n, const char* op, const char* arg);
    // A device-side value argument (device.h: i32 [1]): its device pointer, nullptr if empty.
    const int32_t* device_value(const Tensor& t, const char* op, const char* arg) {
        return t.buf ? i32(t, 1, op, arg) : nullptr;
    }
    // Device pointer (any dtype) after the device and extent checks.
    void* raw(const Tensor& t, const char* op, const char* arg);
    // The stream, with this device made current on the calling thread.
    mtk::Stream stream(const char* op);
    // Throws if the kernels queued by `op` could not be launched.
    void launched(const char* op);
    // Waits for the stream and throws if a kernel reported an invalid index (then clears it).
    // While a graph is being captured it does nothing: the word is checked at the first
    // download after the replay.
    void check_device_error();
    int32_t* error_word() { return ctx_.error_word(); }
    CudaContext& context() { return ctx_; }

private:
    void* checked(const Tensor& t, DType dtype, int64_t n, const char* op, const char* arg);

    // Throws naming `what` if a graph is being captured (host transfers cannot be captured).
    void not_capturing(const char* what) const;

    CudaContext ctx_;
    std::string name_;
    CudaGraphRuntime graph_runtime_{ctx_};
    GraphCache graphs_;
};

// Non-negative size check shared by the op files: throws naming the op and the size.
void check_sizes(const char* op, std::initializer_list<int64_t> sizes);

}  // namespace moetrain::cuda
