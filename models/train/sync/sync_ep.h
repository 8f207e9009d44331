// Expert parallelism (docs/DISTRIBUTED.md): the ranks form groups of P consecutive ranks, rank j
// of a group holds experts [j E/P, (j + 1) E/P) of every MoE layer and updates only the
// non-expert weights and its experts. Non-expert gradients are summed over all ranks, expert
// gradients over the ranks holding the same experts (rank j of every group). A checkpoint
// holds the whole model: gather_state lays the model out whole and assembles the whole
// optimizer state, scatter_state keeps this rank's part again (sync_ep_state.cpp).
#pragma once

#include <memory>
#include <vector>

#include "train/sync/grad_sync.h"

namespace moetrain {

class ExpertParallelSync : public GradSync {
  public:
    ExpertParallelSync(Model& model, const TrainOptions& opts, const DistOptions& dist);
    // Detaches the model from the group (freed with this strategy): a later pass on it fails
    // with one line instead of reaching a freed communicator.
    ~ExpertParallelSync() override;
    ExpertParallelSync(const ExpertParallelSync&) = delete;
    ExpertParallelSync& operator=(const ExpertParallelSync&) = delete;
    void reduce_gradients() override;
    void gather_state(OptimizerState& s) override;
    void scatter_state(OptimizerState& s) override;

  protected:
    // The non-expert weights from rank 0, every block of experts from group 0.
    void broadcast_parameters() override;
    // ZeRO-1 (sync_ep_zero.h) holds only pieces of this rank's layout in its moments: the
    // layout's buffer of `n_local` elements from every rank's pieces of `compact`, a buffer
    // to lay loaded values out in, and this rank's pieces of it back into `compact`. Without
    // ZeRO-1 the compact moments are the layout itself.
    virtual Tensor gather_pieces(const Tensor& compact, int64_t /*n_local*/) { return compact; }
    virtual Tensor layout_buffer(const Tensor& compact, int64_t /*n_local*/) { return compact; }
    virtual void keep_pieces(const Tensor& /*local*/, const Tensor& /*compact*/) {}

    std::unique_ptr<Communicator> group_;     // this rank's expert-parallel group
    std::unique_ptr<Communicator> replicas_;  // the ranks holding this rank's experts
    std::vector<Segment> shared_, mine_;      // non-expert ranges; this rank's expert tensors

  private:
    // 8-bit AdamW: refuses (one line) expert blocks whose edges are not block boundaries.
    void check_expert_blocks_aligned() const;
    Tensor sq_;  // squared norm of this rank's expert gradients, summed over its group
    // This rank's own layout while the model is laid out whole (between gather and scatter).
    std::vector<ParamInfo> shard_layout_;
};

}  // namespace moetrain
