// The strategy a Trainer runs with, and what every strategy shares (sync/grad_sync.h).
#include "train/sync/grad_sync.h"

#include "model/train_passes.h"
#include "shared/mt_math.h"
#include "train/sync/sync_ep.h"
#include "train/sync/sync_ep_zero.h"
#include "train/sync/sync_replicated.h"
#include "train/sync/sync_zero.h"

namespace moetrain {

void alloc_quantized(Device& dev, QuantizedMoments& q, int64_t elems) {
    const int64_t blocks = (elems + MT_QBLOCK - 1) / MT_QBLOCK;
    q.m_codes = dev.alloc(DType::u8, {elems});
    q.v_codes = dev.alloc(DType::u8, {elems});
    q.m_absmax = dev.alloc(DType::f32, {blocks});
    q.v_absmax = dev.alloc(DType::f32, {blocks});
}

GradSync::GradSync(Model& model, const TrainOptions& opts, const DistOptions& dist)
    : model_(model), opts_(opts), dist_(dist) {
    const int64_t n = model.num_params();
    shard_hi_ = n;
    owned_ = {{0, n}};
    stats_ = TrainPasses(model).stats().view(3, {1});
}

int64_t GradSync::moments_len() const {
    int64_t n = 0;
    for (const Segment& seg : owned_) n += seg.count;
    return n;
}

Tensor GradSync::gradient(int64_t first, int64_t count) const {
    return TrainPasses(model_).grads().view(first, {count});
}

void GradSync::sync_parameters() {
    if (!dp() || synced_) return;
    broadcast_parameters();
    TrainPasses(model_).params_changed();
    synced_ = true;
}

void GradSync::broadcast_parameters() {
    dist_.comm->broadcast(model_.device(), TrainPasses(model_).params(), 0);
}

std::unique_ptr<GradSync> make_grad_sync(Model& model, const TrainOptions& opts,
                                         const DistOptions& dist) {
    const int ranks = dist.comm ? dist.comm->size() : 1;
    MT_CHECK(dist.expert_parallel >= 1 && ranks % dist.expert_parallel == 0, "--expert-parallel ",
             dist.expert_parallel, " does not divide the ", ranks, " ranks of this launch");
    if (ranks == 1) return std::make_unique<ReplicatedSync>(model, opts, dist);
    MT_CHECK(dist.zero == 0 || dist.zero == 1, "--zero ", dist.zero, ": only 0 and 1 exist");
    MT_CHECK(dist.bucket_elems >= 1, "gradient bucket size must be >= 1");
    TrainPasses(model).set_data_parallel(dist.comm);
    if (dist.expert_parallel > 1 && dist.zero == 1)
        return std::make_unique<ExpertParallelZeroSync>(model, opts, dist);
    if (dist.expert_parallel > 1) return std::make_unique<ExpertParallelSync>(model, opts, dist);
    if (dist.zero == 1) return std::make_unique<ZeroSync>(model, opts, dist);
    return std::make_unique<ReplicatedSync>(model, opts, dist);
}

// The check every ZeRO-1 strategy makes first.
void check_zero_optimizer(const TrainOptions& opts) {
    MT_CHECK(opts.optimizer != OptimizerKind::sgd, "--zero 1 shards the AdamW moments; ",
             optimizer_name(opts.optimizer), " has no optimizer state to shard");
}

}  // namespace moetrain
