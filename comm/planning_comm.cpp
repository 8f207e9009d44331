// The planning communicator: rank 0 of N for code that sizes its buffers by the ranks (the
// ZeRO-1 shards of a Trainer built by plan_training_memory) but never communicates.
#include "moetrain/comm.h"
#include "moetrain/error.h"

namespace moetrain {
namespace {

class PlanningComm final : public Communicator {
  public:
    explicit PlanningComm(int ranks) : ranks_(ranks) {
        MT_CHECK(ranks >= 1, "ranks must be >= 1 (got ", ranks, ")");
    }
    std::string engine() const override { return "planning"; }
    int rank() const override { return 0; }
    int size() const override { return ranks_; }
    void broadcast(void*, int64_t, DType, int) override { none("broadcast"); }
    void all_reduce(void*, int64_t, DType, ReduceOp) override { none("all_reduce"); }
    void reduce_scatter(const void*, void*, int64_t, DType) override { none("reduce_scatter"); }
    void all_gather(const void*, void*, int64_t, DType) override { none("all_gather"); }
    void all_to_all_v(const void*, const std::vector<int64_t>&, void*, const std::vector<int64_t>&,
                      DType) override {
        none("all_to_all_v");
    }
    void barrier() override { none("barrier"); }
    // Planning sizes the buffers of rank 0, which is in the groups that start at 0.
    std::unique_ptr<Communicator> subgroup(int first, int stride, int count) override {
        subgroup_position(0, ranks_, first, stride, count);
        return std::make_unique<PlanningComm>(count);
    }
    [[noreturn]] void abort(const std::string& message) override { fail(message); }

  private:
    [[noreturn]] static void none(const char* op) {
        fail("the planning communicator runs no collectives (", op, ")");
    }
    int ranks_;
};

}  // namespace

std::unique_ptr<Communicator> make_planning_communicator(int ranks) {
    return std::make_unique<PlanningComm>(ranks);
}

}  // namespace moetrain
