// Routing statistics over one rank or over the ranks of a data-parallel micro-batch
// (routing_stats.h). Data parallel with a capacity, the admission runs over the global
// micro-batch (every rank's rows in rank order): each rank writes its selections per slot and
// expert into its row of `shares` ([ranks, k, E] i32, Device::moe_capacity_shares), and one
// reduce-scatter leaves each rank the selections of the ranks before it: its offsets.
#include "parallel/routing_stats.h"

#include "moetrain/comm.h"

namespace moetrain {
namespace {

class LocalRoutingStats final : public RoutingStats {
  public:
    int64_t ranks() const override { return 1; }
    Tensor admission_offsets(Device& /*dev*/, const Tensor& /*topk_idx*/, const Tensor& /*offsets*/,
                             int64_t /*N*/, int64_t /*k*/, int64_t /*E*/,
                             bool /*exchange*/) override {
        return {};
    }
    Tensor micro_batch_counts(Device& /*dev*/, const Tensor& local, const Tensor& /*global*/,
                              bool /*exchange*/) override {
        return local;
    }
};

class RanksRoutingStats final : public RoutingStats {
  public:
    explicit RanksRoutingStats(Communicator& ranks) : ranks_(ranks) {}

    int64_t ranks() const override { return ranks_.size(); }
    Tensor admission_offsets(Device& dev, const Tensor& topk_idx, const Tensor& offsets, int64_t N,
                             int64_t k, int64_t E, bool exchange) override {
        if (exchange) {
            const int64_t n = ranks_.size() * k * E;
            if (shares_.numel() != n) shares_ = dev.alloc(DType::i32, {n});  // reused by layers
            dev.moe_capacity_shares(shares_, topk_idx, N, k, E, ranks_.rank(), ranks_.size());
            ranks_.reduce_scatter(dev, shares_, offsets);
        }
        return offsets;
    }
    Tensor micro_batch_counts(Device& dev, const Tensor& local, const Tensor& global,
                              bool exchange) override {
        if (exchange) {
            dev.copy(global, local);
            ranks_.all_reduce(dev, global, ReduceOp::sum);
        }
        return global;
    }

  private:
    Communicator& ranks_;
    Tensor shares_;
};

}  // namespace

std::unique_ptr<RoutingStats> make_local_routing_stats() {
    return std::make_unique<LocalRoutingStats>();
}

std::unique_ptr<RoutingStats> make_ranks_routing_stats(Communicator& ranks) {
    return std::make_unique<RanksRoutingStats>(ranks);
}

}  // namespace moetrain
