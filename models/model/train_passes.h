// What the Trainer (models/train/trainer.cpp) needs from a Model beyond its public API: the flat
// parameter and gradient buffers with the decayed range first, the device stats buffer, and the
// queued micro-batch passes. Nothing else of ModelImpl is visible through it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "moetrain/comm.h"
#include "moetrain/model.h"

namespace moetrain {

class TrainPasses {
  public:
    explicit TrainPasses(Model& model);

    int64_t n_params() const;  // elements of params() and grads()
    int64_t n_decay() const;   // the leading elements that get weight decay (MODEL.md 4)
    Tensor params() const;
    Tensor grads() const;
    // Device stats: [0] ce, [1] aux, [2] z accumulated over the step's micro-batches, [3] the
    // squared global gradient norm, which the trainer writes.
    Tensor stats() const;
    void reset_stats();
    // One training micro-batch queued (forward, loss terms * weight into stats, backward adding
    // grad_scale * gradients; MoE capacity applies and the expert-bias counts accumulate);
    // returns the targets that counted.
    int64_t queue_micro_batch(const int32_t* x, const int32_t* y, int B, int T, float grad_scale,
                              float weight);
    std::array<float, 4> read_stats();  // one download
    static LossStats loss(const std::array<float, 4>& stats, int64_t tokens);
    StepRun last_run() const;  // how the last micro-batch's device work ran
    void params_changed();     // after an update wrote params()
    // Expert bias (MODEL.md 2): zero the step's selection counts before its micro-batches, and
    // update the biases from them after the optimizer step (device work; no-ops without one).
    void begin_step_counts();
    void update_expert_bias();
    // Data parallel: the passes agree on the global batch over `comm` (the MoE expert loads and
    // the counted targets, and a capacity's admission order over the global micro-batch);
    // nullptr = one process.
    void set_data_parallel(Communicator* comm);
    // Expert parallel (with set_data_parallel): `group` is this rank's expert-parallel group,
    // whose P ranks hold the experts of every MoE layer in P equal blocks (rank j: experts
    // [j E/P, (j + 1) E/P)). The model keeps only this rank's block from now on (the flat
    // buffers shrink to the shard layout, ExpertShard) and every pass sends the routed rows to
    // their experts' ranks, overlapping the exchange with the experts' work when `overlap`
    // (the same bits either way).
    void set_expert_parallel(Communicator* group, bool overlap);
    // Expert parallel, a collective of the group: whole = true lays the parameters out whole
    // again (every rank's experts all-gathered: checkpoints save and load that layout), false
    // keeps this rank's block again. Between the two the model runs no pass.
    void set_whole_experts(bool whole);
    // The token dispatcher's name ("local", "all-to-all", "overlapped all-to-all"); "" for a
    // dense model.
    std::string token_exchange() const;
    // Forgets the expert-parallel group (its owner is going away); the model keeps its block,
    // so a pass on it refuses with one line.
    void drop_expert_group();
    // The tensors of the flat buffers as they are laid out now.
    const std::vector<ParamInfo>& layout() const;
    // The routed-expert weight tensors of every MoE layer in the flat buffers, in order:
    // `experts` experts (all, or this rank's block) of per_expert elements from `offset`.
    struct ExpertTensor {
        int64_t offset = 0, per_expert = 0, experts = 0;
        int64_t numel() const { return per_expert * experts; }
    };
    std::vector<ExpertTensor> expert_tensors() const;
    // Called after the backward of each layer has written its gradients (set for the last
    // micro-batch of a step whose all-reduce overlaps the backward); empty = never.
    void set_layer_grads_ready(std::function<void(int layer)> f);
    // Layer l's parameters in the flat buffers as [first, first + count) ranges (adjacent
    // tensors merged); layer -1: the parameters of no layer (embeddings, final norm, head).
    struct Range {
        int64_t first = 0, count = 0;
    };
    std::vector<Range> layer_ranges(int layer) const;

  private:
    ModelImpl& im_;
};

}  // namespace moetrain
