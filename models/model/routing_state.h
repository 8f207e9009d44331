// RoutingState: the state of a Model's MoE layers outside the parameters (MODEL.md 2). Each
// MoE layer has a row in the [MoE layers, E] tables below: the expert loads and admitted rows
// of the last forward, the expert bias and the optimizer step's selection counts it is updated
// from. During a pass it hands every MoE layer its routing state (MoeRouting); what crosses
// ranks goes through the model's ParallelContext.
#pragma once

#include <vector>

#include "layers/layers.h"
#include "moetrain/model.h"
#include "parallel/parallel_context.h"

namespace moetrain {

class RoutingState {
  public:
    RoutingState(Device& dev, const ModelConfig& cfg, const ParallelContext& parallel);

    // Expert loads of the last forward: every MoE layer's forward copies its expert counts into
    // its row of load_counts ([MoE layers, E] i32, on the device), downloaded only when
    // expert_load() is read, so a step reads nothing back per layer.
    Tensor load_counts;
    // With a capacity: the rows each MoE layer admitted in the last forward ([MoE layers, E]
    // i32, copied like load_counts; the loads above are the selections before dropping).
    Tensor kept_counts;
    // Expert bias (moe.bias_update_rate > 0): `layers.{l}.moe.router.expert_bias` of every MoE
    // layer, row by row of `expert_bias` ([MoE layers, E] f32, outside the parameter buffer:
    // no gradient, no optimizer state); `buffer_layout` names them with their offsets into it.
    // step_counts ([MoE layers, E] i32) sums the selections of the optimizer step's training
    // micro-batches (before dropping; over every rank when data parallel), which
    // update_expert_bias turns into the bias update after the optimizer step.
    Tensor expert_bias, step_counts;
    std::vector<ParamInfo> buffer_layout;

    int moe_layers() const { return moe_layers_; }
    int row(int layer) const { return moe_row_[static_cast<size_t>(layer)]; }  // -1: dense
    void begin_step_counts();
    void update_expert_bias();
    const std::vector<ExpertLoad>& expert_load();

    // The pass being queued: `over_ranks` whether it is a data-parallel training micro-batch
    // (its statistics are over every rank's rows), `train_step` whether MODEL.md 2's
    // training-only routing (capacity, expert-bias counts) applies. end_pass: the loads
    // changed (host bookkeeping, outside any recording).
    void begin_pass(bool over_ranks, bool train_step);
    void end_pass();
    bool over_ranks() const { return over_ranks_; }
    // The routing state of MoE layer l in the pass being queued.
    MoeRouting layer_routing(const Workspace& ws, int l) const;
    // The capacity of an MoE layer's pass in `ws` (-1: dropless).
    int64_t capacity(const Workspace& ws) const;
    // Queues the copy of MoE layer l's expert counts into load_counts (device work only).
    void record_load(const Workspace& ws, int l);

  private:
    Device& dev_;
    const ModelConfig& cfg_;
    const ParallelContext& parallel_;
    int moe_layers_ = 0;
    std::vector<int> moe_row_;      // layer -> its row of the tables (-1: dense layer)
    std::vector<ExpertLoad> load_;  // the download of load_counts (when load_fresh_)
    bool load_recorded_ = false, load_fresh_ = false;
    bool over_ranks_ = false;  // a data-parallel training micro-batch is being queued
    bool train_step_ = false;  // a train_step micro-batch is being queued
};

}  // namespace moetrain
