// Expert parallelism with ZeRO-1 (sync_ep_zero.h).
#include "train/sync/sync_ep_zero.h"

#include <algorithm>
#include <array>
#include <utility>

#include "model/train_passes.h"

namespace moetrain {

ExpertParallelZeroSync::ExpertParallelZeroSync(Model& model, const TrainOptions& opts,
                                               const DistOptions& dist)
    : ExpertParallelSync(model, opts, dist) {
    check_zero_optimizer(opts);
    owned_.clear();
    int64_t widest = 1, at = 0;
    const std::array<std::pair<const std::vector<Segment>*, Communicator*>, 2> parts = {
        {{&shared_, dist_.comm}, {&mine_, replicas_.get()}}};
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

void ExpertParallelZeroSync::reduce_gradients() {
    TrainPasses im(model_);
    const Tensor grads = im.grads();
    Device& dev = model_.device();
    dist_.comm->all_reduce(dev, im.stats().view(0, {3}), ReduceOp::sum);  // ce, aux, z
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

void ExpertParallelZeroSync::gather_parameters() {
    gather(TrainPasses(model_).params(), {});
}

void ExpertParallelZeroSync::gather(const Tensor& flat, const Tensor& compact) {
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

Tensor ExpertParallelZeroSync::gather_pieces(const Tensor& compact, int64_t n_local) {
    const Tensor local = layout_buffer(compact, n_local);
    gather(local, compact);
    return local;
}

Tensor ExpertParallelZeroSync::layout_buffer(const Tensor& /*compact*/, int64_t n_local) {
    return model_.device().alloc(DType::f32, {n_local});
}

void ExpertParallelZeroSync::keep_pieces(const Tensor& local, const Tensor& compact) {
    Device& dev = model_.device();
    int64_t at = 0;
    for (const Segment& seg : owned_) {
        dev.copy(compact.view(at, {seg.count}), local.view(seg.first, {seg.count}));
        at += seg.count;
    }
}

}  // namespace moetrain
