// Expert parallelism with ZeRO-1 (AdamW; docs/DISTRIBUTED.md), as Megatron-Core's distributed
// optimizer shards it under expert parallelism: the AdamW moments of the non-expert weights
// (shared_) over all ranks, those of this rank's experts (mine_, the same on the N / P ranks
// that hold them: ep_replicas_) over those ranks. Neither part is one range of the flat buffer,
// so each of their segments is sharded on its own, in equal pieces of ceil(count / ranks)
// elements (the last short): the collectives work on the flat buffers' segments in place, and
// only one piece is staged (no copy of a whole part):
//  - gradients: each segment reduce-scattered over its ranks into the staged piece, which goes
//    back into the flat gradient buffer at this rank's piece, where the trainer's update reads
//    it (split at n_decay like every owned segment) and updates the parameters in place;
//  - parameters: this rank's piece staged and all-gathered over the segment's ranks into the
//    flat buffer. The other ranks' experts stay stale here, as without ZeRO;
//  - checkpoints: the moments are all-gathered the same way (gather_moments), and a loaded
//    whole moment buffer is cut back to the pieces with owned_copy.
#include <algorithm>
#include <array>
#include <utility>

#include "model/train_passes.h"
#include "train/trainer_impl.h"

namespace moetrain {

void Trainer::Impl::setup_ep_zero() {
    sharded_.clear();
    owned_.clear();
    int64_t widest = 1, at = 0;
    const std::array<std::pair<const std::vector<Segment>*, Communicator*>, 2> parts = {
        {{&shared_, dist_.comm}, {&mine_, ep_replicas_.get()}}};
    for (const auto& [segs, over] : parts)
        for (const Segment& seg : *segs) {
            ShardedSegment s{seg, over, 0, {}, at};
            const int ranks = over->size(), r = over->rank();
            s.len = (seg.count + ranks - 1) / ranks;
            const int64_t lo = std::min(seg.count, r * s.len);
            s.piece = {seg.first + lo, std::min(seg.count - lo, s.len)};
            if (s.piece.count > 0) owned_.push_back(s.piece);
            at += s.piece.count;
            widest = std::max(widest, s.len);
            sharded_.push_back(s);
        }
    staged_ = model_.device().alloc(DType::f32, {widest});
}

void Trainer::Impl::ep_zero_reduce() {
    const Tensor grads = TrainPasses(model_).grads();
    Device& dev = model_.device();
    // The squared norm: every rank's pieces, summed over all ranks. Each element is counted
    // once: the non-expert pieces partition the non-expert weights over all ranks; the expert
    // pieces partition a rank's experts over the ranks holding them (one of each group), and
    // the ranks of a group hold different experts, so over all ranks every expert element
    // lies in exactly one piece. The zero padding of the last pieces adds nothing.
    bool first = true;
    for (const ShardedSegment& s : sharded_) {
        const Tensor piece = staged_.view(0, {s.len});
        s.over->reduce_scatter(dev, grads.view(s.whole.first, {s.whole.count}), piece);
        dev.sum_squares(stats_, piece, s.len, !first);
        first = false;
        if (s.piece.count > 0) dev.copy(grads.view(s.piece.first, {s.piece.count}), piece);
    }
    dist_.comm->all_reduce(dev, stats_, ReduceOp::sum);
}

void Trainer::Impl::ep_zero_gather(const Tensor& flat, const Tensor& compact) {
    Device& dev = model_.device();
    for (const ShardedSegment& s : sharded_) {
        const int64_t cnt = s.piece.count;
        if (cnt > 0)
            dev.copy(staged_.view(0, {cnt}),
                     compact ? compact.view(s.at, {cnt}) : flat.view(s.piece.first, {cnt}));
        // The last pieces' padding lies past the segment's end, which the all-gather leaves out.
        s.over->all_gather(dev, staged_.view(0, {s.len}),
                           flat.view(s.whole.first, {s.whole.count}));
    }
}

}  // namespace moetrain
