// ModelPasses: the passes of the MODEL.md transformer over its layers, which Model, the Trainer,
// generation and gradcheck are built from. A training micro-batch (forward, loss terms, the
// backward that first re-runs what a layer's workspace dropped), the forward over all logits,
// and generation's prefill and recorded decode step. They read the weights of a ParamStore,
// the routing state of a RoutingState and the buffers of a WorkspaceCache, and go across ranks
// through the ParallelContext; the layer math lives in the per-layer files (layers.h).
// model_passes.cpp holds the entry points, layer_walk.cpp the walk over the layers.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layers/layers.h"
#include "model/param_store.h"
#include "model/routing_state.h"
#include "model/workspace_cache.h"
#include "parallel/parallel_context.h"

namespace moetrain {

// Loss terms from the downloaded stats buffer (ce, aux, z, ...).
LossStats loss_from_stats(const std::array<float, 4>& s, int64_t tokens);

class ModelPasses {
  public:
    ModelPasses(Device& dev, const ModelConfig& cfg, ParallelContext& parallel, ParamStore& store,
                RoutingState& routing, WorkspaceCache& workspaces);

    // Device stats: [0] ce, [1] aux, [2] z accumulated over micro-batches (each weighted),
    // [3] squared global gradient norm (written by the trainer). Downloaded once per step.
    Tensor stats;
    Tensor micro;  // one micro-batch's ce, aux, z
    // How the last queue_micro_batch, forward_cached (always eager) or decode_step ran.
    StepRun last_run = StepRun::eager;
    // When set, every MoE layer appends its chosen experts (gradient checks watch for flips).
    std::vector<int32_t>* record_routing = nullptr;
    // When set, called after the backward of layer l has written that layer's gradients (the
    // trainer starts their all-reduce while the earlier layers' backward runs).
    std::function<void(int layer)> layer_grads_ready;

    // Attention in the 16-bit compute dtype of bf16 / fp16 (opt-in, Model::set_attention16).
    bool attention16() const { return attention16_; }
    void set_attention16(bool on);
    DType attention_compute() const;  // AttnDims::compute: f32 unless attention16 and 16-bit

    void reset_stats() { dev_.fill(stats, 0.0f); }
    std::array<float, 4> read_stats();

    // Queues one micro-batch: forward, loss terms * weight added to stats[0..2] and, when
    // backward, the backward pass adding grad_scale * gradients to the gradient buffer.
    // Returns the number of targets that counted. Validates ids, targets and T. After the
    // upload of the tokens, the device work is one recorded step (Device::run_recorded: a
    // CUDA Graph replay once warmed up); last_run says how the last one ran.
    // A train_step micro-batch (the Trainer's) is where MODEL.md 2's training-only routing
    // applies: capacity dropping, and the expert-bias counts added to step_counts. Every other
    // pass (Model::forward_backward, gradcheck, eval, generation) is dropless.
    int64_t queue_micro_batch(const int32_t* x, const int32_t* y, int B, int T, float grad_scale,
                              float weight, bool backward, bool train_step = false);
    // Forward over T new tokens per row at positions pos0.. using the per-layer KV cache,
    // then logits [B, V] of each row's last position (generation's prefill; runs eagerly).
    void forward_cached(const int32_t* x, int B, int T, int64_t pos0,
                        const std::vector<KvSlot>& cache, const Tensor& logits);
    // Generation's decode step: uploads one token per row (x[B], at position pos: the learned
    // position ids), then queues the forward over the KV cache, the logits [B, V] and `then`
    // (the sampler) as one recorded step (Device::run_recorded) keyed by `key` plus the
    // workspace and weight generations. The cache slots must read the position from device
    // memory (KvSlot::pos_dev) so that this work is the same at every position; `key` names
    // the cache, logits and sampler buffers and arguments. last_run says how it ran.
    void decode_step(const int32_t* x, int B, int64_t pos, const std::vector<KvSlot>& cache,
                     const Tensor& logits, const std::string& key,
                     const std::function<void()>& then);
    // Logits of every position, [B*T, V] on the host.
    std::vector<float> forward_all_logits(const int32_t* x, int B, int T);
    // Loss terms of one batch with the cross-entropy summed in double on the host.
    LossStats loss_f64(const int32_t* x, const int32_t* y, int B, int T);

  private:
    // ---- model_passes.cpp ----
    // Checks and uploads ids (and targets, positions pos0 + t); returns the counted targets.
    int64_t load_batch(Workspace& ws, const int32_t* x, const int32_t* y, int64_t pos0);
    // Runs `queue` (device work only) as one recorded step (Device::run_recorded) and sets
    // last_run. `key` names the step's scalar arguments and own buffers; the workspace and
    // 16-bit weight generations are appended here. While routing is recorded (downloads) the
    // step runs eagerly, never captured.
    void run_step(const std::string& key, const Workspace& ws, const std::function<void()>& queue);

    // ---- layer_walk.cpp ----
    void forward_layers(Workspace& ws, const std::vector<KvSlot>* cache);
    // Layer l's forward up to the FFN input: norm, attention into x_mid, norm.
    void attention_part(Workspace& ws, int l, const KvSlot* cache);
    // Layer l's FFN / MoE: x_out += FFN(n2.y), aux / z terms into aux_stats. With x_out and
    // aux_stats empty (recompute) only the activations the backward reads are produced.
    void ffn_part(Workspace& ws, int l, const Tensor& x_out, const Tensor& aux_stats,
                  std::vector<int32_t>* routing);
    // Re-runs what layer l's forward dropped (Workspace::recomputes) before its backward.
    void recompute_layer(Workspace& ws, int l);
    void backward_layers(Workspace& ws, float grad_scale);
    // MoE layer l's pass in the workspace being queued: its routing state and the parallel
    // context's statistics and dispatcher (planned for the workspace's shape on first use).
    MoePass moe_pass(const Workspace& ws, int l, std::vector<int32_t>* record);

    Device& dev_;
    const ModelConfig& cfg_;
    ParallelContext& parallel_;
    ParamStore& store_;
    RoutingState& routing_;
    WorkspaceCache& workspaces_;
    bool attention16_ = false;
};

}  // namespace moetrain
