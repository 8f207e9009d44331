// ZeRO-1 (docs/DISTRIBUTED.md): the gradients reduce-scattered into each rank's shard of the
// flat buffer, the global gradient norm from the shards' squared norms, each rank's AdamW
// moments (or 8-bit state) covering its shard only, the parameters all-gathered after the
// shard updates, and the state gathered for checkpoints and scattered after loading them.
#pragma once

#include "train/sync/grad_sync.h"

namespace moetrain {

class ZeroSync final : public GradSync {
  public:
    ZeroSync(Model& model, const TrainOptions& opts, const DistOptions& dist);
    int64_t moments_len() const override { return shard_len_; }  // padded: equal all-gathers
    int64_t decay_state(QuantizedMoments& d) const override;
    void reduce_gradients() override;
    Tensor gradient(int64_t first, int64_t count) const override;
    void gather_parameters() override;
    void gather_state(OptimizerState& s) override;
    void scatter_state(OptimizerState& s) override;

  private:
    bool q8() const { return opts_.optimizer == OptimizerKind::adamw8bit; }
    int64_t shard_len_ = 0;   // ceil(n / ranks): every rank's padded shard size
    Tensor gshard_, pshard_;  // the reduced gradient / updated parameter shard
};

}  // namespace moetrain
