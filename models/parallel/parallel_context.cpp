// The parallel context of a model's passes (parallel_context.h).
#include "parallel/parallel_context.h"

#include "dispatch/dispatchers.h"
#include "moetrain/comm.h"
#include "parallel/routing_stats.h"

namespace moetrain {

ParallelContext::ParallelContext(const ModelConfig& c)
    : cfg_(c), local_stats_(make_local_routing_stats()) {
    if (c.moe) dispatcher_ = make_token_dispatcher(c, nullptr, false);
}

ParallelContext::~ParallelContext() = default;

void ParallelContext::set_data_parallel(Communicator* ranks) {
    ranks_ = ranks;
    ranks_stats_ = ranks ? make_ranks_routing_stats(*ranks) : nullptr;
}

void ParallelContext::set_expert_parallel(Communicator* group, bool overlap) {
    expert_group_ = group;
    if (cfg_.moe) dispatcher_ = make_token_dispatcher(cfg_, group, overlap);
    planned_shape_ = 0;
}

TokenDispatcher& ParallelContext::dispatcher(Device& dev, uint64_t shape, int64_t N, DType xg,
                                             int moe_layers) {
    MT_CHECK(dispatcher_, "a token dispatcher of a model without MoE layers");
    if (planned_shape_ != shape) {
        dispatcher_->plan(dev, N, xg, moe_layers);
        planned_shape_ = shape;
    }
    return *dispatcher_;
}

int64_t ParallelContext::data_ranks() const {
    return ranks_ ? ranks_->size() : 1;
}

RoutingStats& ParallelContext::routing_stats(bool over_ranks) {
    return over_ranks && ranks_stats_ ? *ranks_stats_ : *local_stats_;
}

int64_t ParallelContext::sum_over_ranks(int64_t count) const {
    if (!ranks_) return count;
    MT_CHECK(count < (int64_t{1} << 31) / ranks_->size(), "too many targets per rank");
    auto all = static_cast<int32_t>(count);
    ranks_->all_reduce(&all, 1, DType::i32, ReduceOp::sum);
    return all;
}

void ParallelContext::sum_over_ranks(Device& dev, const Tensor& counts) const {
    if (ranks_) ranks_->all_reduce(dev, counts, ReduceOp::sum);
}

}  // namespace moetrain
