// The parallel context of a model's passes (set by the Trainer through TrainPasses): the
// data-parallel ranks and the expert-parallel group, and what the MoE layers use of them, the
// routing statistics and the token dispatcher (models/layers/moe_parallel.h). Everything the
// model's passes do across ranks goes through here; the layers only see the two interfaces.
#pragma once

#include <memory>
#include <string>

#include "layers/moe_parallel.h"

namespace moetrain {

class Communicator;

class ParallelContext {
  public:
    explicit ParallelContext(const ModelConfig& c);
    ~ParallelContext();
    ParallelContext(const ParallelContext&) = delete;
    ParallelContext& operator=(const ParallelContext&) = delete;

    // Data parallel over `ranks` (nullptr: one process): training passes agree on the global
    // micro-batch (counted targets, routing statistics).
    void set_data_parallel(Communicator* ranks);
    // Expert parallel over `group` (nullptr: every expert here): the MoE layers' rows go to
    // their experts' ranks (the all-to-all dispatcher, its exchanges overlapped with the
    // experts' work when `overlap`).
    void set_expert_parallel(Communicator* group, bool overlap);
    Communicator* expert_group() const { return expert_group_; }

    // The ranks of a data-parallel micro-batch (1 in one process).
    int64_t data_ranks() const;
    bool data_parallel() const { return data_ranks() > 1; }
    bool expert_parallel() const { return expert_group_ != nullptr; }

    // The routing statistics of a pass: over every rank's rows for a data-parallel training
    // pass (`over_ranks`), else over this rank's.
    RoutingStats& routing_stats(bool over_ranks);
    // The token dispatcher, planned for micro-batches of N tokens per rank (rows stored in
    // `xg`, `moe_layers` MoE layers) whenever `shape` (the workspace's generation) differs from
    // the last call's or the dispatcher was replaced.
    TokenDispatcher& dispatcher(Device& dev, uint64_t shape, int64_t N, DType xg, int moe_layers);

    // The dispatcher's name; "" for a dense model.
    std::string token_exchange() const { return dispatcher_ ? dispatcher_->name() : ""; }

    // Sums over the data-parallel ranks (collectives of every rank): a count of targets; an
    // i32 device tensor in place.
    int64_t sum_over_ranks(int64_t count) const;
    void sum_over_ranks(Device& dev, const Tensor& counts) const;

  private:
    const ModelConfig& cfg_;
    Communicator* ranks_ = nullptr;
    Communicator* expert_group_ = nullptr;
    std::unique_ptr<RoutingStats> local_stats_, ranks_stats_;
    std::unique_ptr<TokenDispatcher> dispatcher_;
    uint64_t planned_shape_ = 0;  // 0: not planned
};

}  // namespace moetrain
