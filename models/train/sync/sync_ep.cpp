// Expert parallelism (sync_ep.h): its subgroups and segments, the first step's broadcast and
// the gradient reductions.
#include "train/sync/sync_ep.h"

#include <algorithm>
#include <string>

#include "model/train_passes.h"
#include "shared/mt_math.h"

namespace moetrain {

ExpertParallelSync::ExpertParallelSync(Model& model, const TrainOptions& opts,
                                       const DistOptions& dist)
    : GradSync(model, opts, dist) {
    const ModelConfig& cfg = model_.config();
    const int P = dist_.expert_parallel, R = dist_.comm->size(), r = dist_.comm->rank();
    MT_CHECK(cfg.moe, "--expert-parallel ", P, " needs an MoE model (this one is dense)");
    MT_CHECK(cfg.moe->n_experts % P == 0, "--expert-parallel ", P, " does not divide the ",
             cfg.moe->n_experts, " experts of every MoE layer");
    const bool q8 = opts_.optimizer == OptimizerKind::adamw8bit;
    MT_CHECK(!q8 || dist_.zero == 0,
             "--expert-parallel with --zero 1 and --optimizer adamw8bit is not supported (the "
             "ZeRO-1 pieces of the expert blocks would cut through its 256-element blocks); use "
             "--zero 0 or --optimizer adamw");
    if (q8) check_expert_blocks_aligned();  // on the whole layout
    group_ = dist_.comm->subgroup(r / P * P, 1, P);
    replicas_ = dist_.comm->subgroup(r % P, P, R / P);
    TrainPasses im(model_);
    // The model keeps this rank's experts only. The token exchange overlaps the experts' work
    // where it is staged through the host anyway (mpi; nccl moves device memory).
    im.set_expert_parallel(group_.get(), dist_.overlap && group_->engine() == "mpi");
    // The flat buffers: the non-expert weights (shared_) and this rank's experts (mine_).
    const int64_t n = im.n_params();
    int64_t at = 0;
    for (const TrainPasses::ExpertTensor& t : im.expert_tensors()) {
        if (t.offset > at) shared_.push_back({at, t.offset - at});
        mine_.push_back({t.offset, t.numel()});
        at = t.offset + t.numel();
    }
    if (at < n) shared_.push_back({at, n - at});
    owned_ = {{0, n}};
    sq_ = model_.device().alloc(DType::f32, {1});
}

ExpertParallelSync::~ExpertParallelSync() {
    TrainPasses(model_).drop_expert_group();
}

void ExpertParallelSync::check_expert_blocks_aligned() const {
    // 8-bit AdamW updates a rank's decayed range with one adamw8bit call; that is the block
    // grid of one process (a block reads only itself) when every boundary between an expert
    // block and its neighbours in the whole layout lies on a block boundary of the decayed
    // range [0, nd) or at nd: the rank's buffer is then whole blocks of the whole buffer's.
    // The expert tensors are rank 3, so all of them lie in the decayed range.
    TrainPasses im(model_);
    const int64_t nd = im.n_decay(), P = dist_.expert_parallel;
    for (const TrainPasses::ExpertTensor& t : im.expert_tensors()) {
        MT_CHECK(t.offset + t.numel() <= nd, "expert tensor [", t.offset, ", ",
                 t.offset + t.numel(), ") is outside the decayed range [0, ", nd, ")");
        for (int64_t q = 0; q <= P; ++q) {
            const int64_t edge = t.offset + q * (t.numel() / P);
            if (edge % MT_QBLOCK == 0 || edge == nd) continue;
            std::string name = "an expert tensor";
            for (const ParamInfo& p : im.layout())
                if (p.offset == t.offset) name = p.name;
            fail("--expert-parallel ", P,
                 " with --optimizer adamw8bit needs every expert block to start and end at a "
                 "multiple of ",
                 MT_QBLOCK, " elements of the decayed range (", name, ": offset ", edge,
                 "); use --optimizer adamw");
        }
    }
}

void ExpertParallelSync::broadcast_parameters() {
    TrainPasses im(model_);
    Device& dev = model_.device();
    for (const Segment& seg : shared_)
        dist_.comm->broadcast(dev, im.params().view(seg.first, {seg.count}), 0);
    for (const Segment& seg : mine_)
        replicas_->broadcast(dev, im.params().view(seg.first, {seg.count}), 0);
}

void ExpertParallelSync::reduce_gradients() {
    TrainPasses im(model_);
    Device& dev = model_.device();
    Communicator& c = *dist_.comm;
    c.all_reduce(dev, im.stats().view(0, {3}), ReduceOp::sum);  // ce, aux, z: sums of shares
    // Non-expert gradients over every rank, this rank's experts over the ranks holding
    // them; the other experts' gradients are zero here and belong to their owners. The
    // squared norm: the shared part, plus every expert once (summed over the group).
    auto reduce = [&](const std::vector<Segment>& segs, Communicator& over) {
        for (const Segment& seg : segs)
            for (int64_t off = 0; off < seg.count; off += dist_.bucket_elems)
                over.all_reduce(dev,
                                im.grads().view(seg.first + off,
                                                {std::min(dist_.bucket_elems, seg.count - off)}),
                                ReduceOp::sum);
    };
    reduce(shared_, c);
    if (replicas_->size() > 1) reduce(mine_, *replicas_);
    dev.fill(stats_, 0.0f);
    dev.fill(sq_, 0.0f);
    for (const Segment& seg : shared_)
        dev.sum_squares(stats_, im.grads().view(seg.first, {seg.count}), seg.count, true);
    for (const Segment& seg : mine_)
        dev.sum_squares(sq_, im.grads().view(seg.first, {seg.count}), seg.count, true);
    group_->all_reduce(dev, sq_, ReduceOp::sum);
    dev.axpby(stats_, 1.0f, sq_, 1.0f, 1);
}

}  // namespace moetrain
