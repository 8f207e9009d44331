// What the Trainer (models/train/trainer.cpp) needs from a Model beyond its public API: the flat
// parameter and gradient buffers with the decayed range first, the device stats buffer, and the
// queued micro-batch passes. Nothing else of ModelImpl is visible through it.
#pragma once

#include <array>
#include <cstdint>

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
    // the counted targets); nullptr = one process. A capacity (moe.capacity_factor) is refused
    // over more than one rank: its admission order spans the global micro-batch.
    void set_data_parallel(Communicator* comm);

  private:
    ModelImpl& im_;
};

}  // namespace moetrain
