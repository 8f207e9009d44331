// ModelImpl: the state behind moetrain::Model (parameter/gradient buffers, their typed views,
// workspaces per batch shape, the device stats buffer) and the passes over the layers that
// Model, Trainer, generate() and gradcheck() are built from.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "layers/layers.h"
#include "model/param_layout.h"
#include "model/workspace.h"
#include "moetrain/model.h"
#include "moetrain/precision.h"
#include "parallel/parallel_context.h"

namespace moetrain {

// Host-side seeded initial values of every parameter, laid out like the flat buffer.
std::vector<float> init_values(const ModelConfig& c, const std::vector<ParamInfo>& layout,
                               uint64_t seed);

// Loss terms from the downloaded stats buffer (ce, aux, z, ...).
LossStats loss_from_stats(const std::array<float, 4>& s, int64_t tokens);

class ModelImpl {
  public:
    ModelImpl(Device& device, const ModelConfig& config);

    Device& dev;
    const ModelConfig cfg;
    std::vector<ParamInfo> layout;
    std::map<std::string, size_t> index;  // name -> position in layout
    int64_t n_params = 0, n_decay = 0;    // all elements; leading decayed elements
    Tensor params, grads;
    ModelW w, gw;  // views of params / grads
    // Mixed precision: `params_lo` is the 16-bit working copy of the decayed (matrix) range
    // of `params`, refreshed from the fp32 master values before a forward pass whenever they
    // changed (params_version); `wf` are the weights the passes multiply with (= w in fp32,
    // w with the matrices replaced by params_lo views otherwise, see with_compute_matrices).
    Precision precision = Precision::fp32;
    Tensor params_lo;
    uint64_t lo_generation = 0;  // next_buffer_generation() at the last set_precision
    ModelW wf;
    uint64_t params_version = 0, lo_version = 0;
    void set_precision(Precision p);
    void params_changed() { ++params_version; }
    void refresh_compute_weights();
    // Device stats: [0] ce, [1] aux, [2] z accumulated over micro-batches (each weighted),
    // [3] squared global gradient norm (written by the trainer). Downloaded once per step.
    Tensor stats;
    Tensor micro;  // one micro-batch's ce, aux, z
    // Expert loads of the last forward: every MoE layer's forward copies its expert counts into
    // its row of load_counts ([MoE layers, E] i32, on the device), downloaded only when
    // expert_load() is read, so a step reads nothing back per layer.
    Tensor load_counts;
    // With a capacity: the rows each MoE layer admitted in the last forward ([MoE layers, E]
    // i32, copied like load_counts; the loads above are the selections before dropping).
    Tensor kept_counts;
    const std::vector<ExpertLoad>& expert_load();
    // Expert bias (MODEL.md 2, moe.bias_update_rate > 0): `layers.{l}.moe.router.expert_bias`
    // of every MoE layer, row by row of `expert_bias` ([MoE layers, E] f32, outside the
    // parameter buffer: no gradient, no optimizer state); `buffer_layout` names them with
    // their offsets into it. step_counts ([MoE layers, E] i32) sums the selections of the
    // optimizer step's training micro-batches (before dropping; over every rank when data
    // parallel), which update_expert_bias turns into the bias update after the optimizer step.
    Tensor expert_bias, step_counts;
    std::vector<ParamInfo> buffer_layout;
    void begin_step_counts();
    void update_expert_bias();
    // Bound on the logits chunk (elements) of workspaces planned from now on; tests shrink it
    // to exercise the chunked head.
    int64_t logit_budget = kLogitBudget;
    // When set, every MoE layer appends its chosen experts (gradient checks watch for flips).
    std::vector<int32_t>* record_routing = nullptr;
    // Data parallel and expert parallel (set by the Trainer through TrainPasses): the ranks,
    // and what the MoE layers use of them (models/parallel/parallel_context.h). Training
    // micro-batches of a data-parallel model are this rank's rows of the global micro-batch:
    // their target count and every MoE layer's routing statistics are over every rank, so the
    // loss terms and gradients are this rank's shares of the global ones; inference passes stay
    // local. Expert parallel, the flat buffers hold only this rank's block of experts (`shard`:
    // block j of P, build_param_layout), and every pass sends the routed rows to their
    // experts' ranks (the all-to-all dispatcher): each pass is a collective of the group.
    ParallelContext parallel;
    ExpertShard shard;
    // Re-lays the parameters out for `to` (the whole layout or this rank's block of the group's
    // experts): whole -> block keeps this rank's experts, block -> whole all-gathers every
    // rank's over the expert group (a collective; checkpoints save and load the whole layout). The
    // gradients are reallocated (zero) and the 16-bit copy refreshed before the next pass.
    void set_expert_shard(const ExpertShard& to);
    // When set, called after the backward of layer l has written that layer's gradients (the
    // trainer starts their all-reduce while the earlier layers' backward runs).
    std::function<void(int layer)> layer_grads_ready;

    // Gradient checkpointing of the training workspaces planned from now on (set_recompute
    // drops the training workspaces planned with another mode).
    Recompute recompute() const { return recompute_; }
    void set_recompute(Recompute r);
    // bf16 / fp16: whether training workspaces store the activations only matrix products
    // read in the 16-bit compute dtype (default) or in f32 (bit-identical results; tests
    // compare the two). Drops the training workspaces planned with the other setting.
    bool activations16() const { return activations16_; }
    void set_activations16(bool on);
    // Attention in the 16-bit compute dtype of bf16 / fp16 (opt-in, Model::set_attention16).
    bool attention16() const { return attention16_; }
    void set_attention16(bool on);
    DType attention_compute() const;  // AttnDims::compute: f32 unless attention16 and 16-bit

    // The workspace of shape (B, T), planned on first use (valid until the next call).
    Workspace& workspace(int B, int T, bool training);

    void reset_stats() { dev.fill(stats, 0.0f); }
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
    // How the last queue_micro_batch, forward_cached (always eager) or decode_step ran.
    StepRun last_run = StepRun::eager;
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
    // Makes `next` the layout with `values` its parameters (fresh gradients, fp32 views).
    void adopt_layout(std::vector<ParamInfo> next, Tensor values);
    // Checks and uploads ids (and targets, positions pos0 + t); returns the counted targets.
    int64_t load_batch(Workspace& ws, const int32_t* x, const int32_t* y, int64_t pos0);
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
    // Queues the copy of MoE layer l's expert counts into load_counts (device work only).
    void record_load(const Workspace& ws, int l);
    // After a forward was queued: the loads changed (host bookkeeping, outside any recording).
    void loads_written();
    // Runs `queue` (device work only) as one recorded step (Device::run_recorded) and sets
    // last_run. `key` names the step's scalar arguments and own buffers; the workspace and
    // 16-bit weight generations are appended here. While routing is recorded (downloads) the
    // step runs eagerly, never captured.
    void run_step(const std::string& key, const Workspace& ws, const std::function<void()>& queue);
    // MoE layer l's pass in the workspace being queued: its routing state and the parallel
    // context's statistics and dispatcher (planned for the workspace's shape on first use).
    MoePass moe_pass(const Workspace& ws, int l, std::vector<int32_t>* record);
    // The capacity of MoE layer l's pass (-1: dropless).
    int64_t moe_capacity(const Workspace& ws) const;

    // Planned workspaces by (B, T, training). Inference ones are dropped when a fifth shape
    // arrives (a workspace is only used within one call, so no reference outlives this).
    static constexpr int kMaxInferenceWorkspaces = 4;
    void drop_training_workspaces();
    Recompute recompute_ = Recompute::none;
    bool activations16_ = true;
    bool attention16_ = false;
    std::map<std::tuple<int, int, bool>, std::unique_ptr<Workspace>> workspaces_;
    std::vector<int> moe_row_;      // layer -> its row of load_counts (-1: dense layer)
    std::vector<ExpertLoad> load_;  // the download of load_counts (when load_fresh_)
    bool load_recorded_ = false, load_fresh_ = false;
    bool dp_pass_ = false;     // a data-parallel training micro-batch is being queued
    bool train_step_ = false;  // a train_step micro-batch is being queued
};

}  // namespace moetrain
