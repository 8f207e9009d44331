// Expert parallelism with ZeRO-1 (AdamW; docs/DISTRIBUTED.md), as Megatron-Core's distributed
// optimizer shards it under expert parallelism: the AdamW moments of the non-expert weights
// (shared_) over all ranks, those of this rank's experts (mine_, the same on the N / P ranks
// that hold them: replicas_) over those ranks. Neither part is one range of the flat buffer,
// so each of their segments is sharded on its own, in equal pieces of ceil(count / ranks)
// elements (the last short): the collectives work on the flat buffers' segments in place, and
// only one piece is staged (no copy of a whole part):
//  - gradients: each segment reduce-scattered over its ranks into the staged piece, which goes
//    back into the flat gradient buffer at this rank's piece, where the trainer's update reads
//    it (split at n_decay like every owned segment) and updates the parameters in place;
//  - parameters: this rank's piece staged and all-gathered over the segment's ranks into the
//    flat buffer. The other ranks' experts stay stale here, as without ZeRO;
//  - checkpoints: the moments are all-gathered the same way, and a loaded whole moment buffer
//    is cut back to the pieces.
#pragma once

#include <vector>

#include "train/sync/sync_ep.h"

namespace moetrain {

class ExpertParallelZeroSync final : public ExpertParallelSync {
  public:
    ExpertParallelZeroSync(Model& model, const TrainOptions& opts, const DistOptions& dist);
    void reduce_gradients() override;
    void gather_parameters() override;

  protected:
    Tensor gather_pieces(const Tensor& compact, int64_t n_local) override;
    Tensor layout_buffer(const Tensor& compact, int64_t n_local) override;
    void keep_pieces(const Tensor& local, const Tensor& compact) override;

  private:
    // Every segment of shared_ (over all ranks) and of mine_ (over replicas_), each in equal
    // pieces; owned_ is this rank's pieces in that order (the moments hold them so).
    struct ShardedSegment {
        Segment whole;
        Communicator* over = nullptr;  // the ranks sharing its pieces
        int64_t len = 0;               // every rank's piece: ceil(whole.count / ranks)
        Segment piece;                 // this rank's (count < len at the end, possibly 0)
        int64_t at = 0;                // the piece's first element in the moments
    };
    std::vector<ShardedSegment> sharded_;
    Tensor staged_;  // one piece
    // Every rank's pieces of `flat` (or, with `compact`, of the moments) into `flat`.
    void gather(const Tensor& flat, const Tensor& compact);
};

}  // namespace moetrain
