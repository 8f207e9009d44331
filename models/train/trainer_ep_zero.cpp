// Expert parallelism with ZeRO-1 (AdamW; docs/DISTRIBUTED.md), as Megatron-Core's distributed
// optimizer does it with expert parallelism: the AdamW moments of the non-expert weights
// (shared_) are sharded over all ranks, those of this rank's experts (mine_, the same on the
// N / P ranks that hold them: ep_replicas_) over those ranks. Neither part is one range of the
// flat buffer, so each is packed back to back into a device buffer (a copy per segment) and
// cut into equal shards of ceil(total / ranks) elements:
//  - gradients: each part packed and reduce-scattered over its ranks; the reduced shard goes
//    back into the flat gradient buffer at the positions it came from (its pieces), where the
//    trainer's update reads it (split at n_decay like every owned segment) and updates the
//    parameters in place;
//  - parameters: this rank's pieces packed, all-gathered over the part's ranks and unpacked
//    into the flat buffer. The other ranks' experts stay stale here, as without ZeRO;
//  - checkpoints: the moments are all-gathered the same way (gather_moments), and a loaded
//    whole moment buffer is cut back to the pieces with copy_segments(owned_, ...).
#include <algorithm>
#include <array>
#include <utility>

#include "model/train_passes.h"
#include "moetrain/train.h"

namespace moetrain {

void Trainer::setup_ep_zero() {
    parts_.clear();
    owned_.clear();
    int64_t most = 0, widest = 0, at = 0;
    const std::array<std::pair<const std::vector<Segment>*, Communicator*>, 2> split = {
        {{&shared_, dist_.comm}, {&mine_, ep_replicas_.get()}}};
    for (const auto& [segs, over] : split) {
        PackedPart p;
        p.segs = *segs;
        p.over = over;
        for (const Segment& seg : p.segs) p.total += seg.count;
        const int ranks = over->size(), r = over->rank();
        p.len = (p.total + ranks - 1) / ranks;
        const int64_t lo = std::min(p.total, r * p.len), hi = std::min(p.total, lo + p.len);
        p.count = hi - lo;
        p.at = at;
        at += p.count;
        int64_t packed = 0;  // packed position of the segment's first element
        for (const Segment& seg : p.segs) {
            const int64_t a = std::max(lo, packed), b = std::min(hi, packed + seg.count);
            if (a < b) p.pieces.push_back({seg.first + a - packed, b - a});
            packed += seg.count;
        }
        owned_.insert(owned_.end(), p.pieces.begin(), p.pieces.end());
        most = std::max(most, p.total);
        widest = std::max(widest, p.len);
        parts_.push_back(std::move(p));
    }
    Device& dev = model_.device();
    packed_ = dev.alloc(DType::f32, {most});
    staged_ = dev.alloc(DType::f32, {widest});
}

void Trainer::ep_zero_reduce() {
    const Tensor grads = TrainPasses(model_).grads();
    Device& dev = model_.device();
    // The squared norm: every rank's shards of both parts, summed over all ranks. Each element
    // is counted once: the non-expert shards partition the non-expert weights over all ranks;
    // the expert shards partition a rank's experts over the ranks holding them (one of each
    // group), and the ranks of a group hold different experts, so over all ranks every expert
    // element lies in exactly one shard. The zero padding of the last shards adds nothing.
    bool first = true;
    for (const PackedPart& p : parts_) {
        copy_segments(p.segs, grads, packed_, false);
        const Tensor shard = staged_.view(0, {p.len});
        p.over->reduce_scatter(dev, packed_.view(0, {p.total}), shard);  // padded with zeros
        dev.sum_squares(stats_, shard, p.len, !first);
        first = false;
        copy_segments(p.pieces, grads, staged_, true);
    }
    dist_.comm->all_reduce(dev, stats_, ReduceOp::sum);
}

void Trainer::ep_zero_gather(const Tensor& flat, const Tensor& compact) {
    Device& dev = model_.device();
    for (const PackedPart& p : parts_) {
        if (!compact)
            copy_segments(p.pieces, flat, staged_, false);
        else if (p.count > 0)
            dev.copy(staged_.view(0, {p.count}), compact.view(p.at, {p.count}));
        // The last shards' padding lies past `total`, which the all-gather leaves out.
        p.over->all_gather(dev, staged_.view(0, {p.len}), packed_.view(0, {p.total}));
        copy_segments(p.segs, flat, packed_, true);
    }
}

}  // namespace moetrain
