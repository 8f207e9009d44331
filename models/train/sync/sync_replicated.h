// Replicated training: one process, or data parallel with every rank updating every parameter
// (docs/DISTRIBUTED.md): the gradients all-reduced in buckets, or, on a host-memory engine
// (mpi), each layer's all-reduce started as soon as the last backward has written it.
#pragma once

#include <vector>

#include "train/sync/grad_sync.h"

namespace moetrain {

class ReplicatedSync final : public GradSync {
  public:
    ReplicatedSync(Model& model, const TrainOptions& opts, const DistOptions& dist)
        : GradSync(model, opts, dist) {}
    bool overlaps() const override;
    void begin_last_micro_batch() override;  // every layer starts its all-reduce
    void reduce_gradients() override;

  private:
    void start_reduce(int layer);
    // The host copy the non-blocking all-reduces run on, and their ids.
    std::vector<float> hgrads_;
    std::vector<int64_t> pending_;
};

}  // namespace moetrain
