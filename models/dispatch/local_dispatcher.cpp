// The local token dispatcher (dispatchers.h): every expert is on this rank, so the rows
// sorted by expert are the one block the grouped expert FFN runs over, in place: its outputs
// are a.yrows and its input-row gradients g.dxg, with nothing moved.
#include "dispatch/dispatchers.h"

namespace moetrain {
namespace {

class LocalDispatcher final : public TokenDispatcher {
  public:
    explicit LocalDispatcher(const ModelConfig& c) : experts_(c.moe->n_experts) {}

    const char* name() const override { return "local"; }
    int64_t local_experts() const override { return experts_; }
    void plan(Device& /*dev*/, int64_t /*N*/, DType /*xg*/, int /*moe_layers*/) override {}

    void forward(Device& /*dev*/, int /*moe_layer*/, const MoeActs& a, int64_t rows,
                 const Experts& experts) override {
        experts(block(a, rows));
    }
    void backward(Device& /*dev*/, int /*moe_layer*/, const MoeActs& a, const GradScratch& g,
                  int64_t rows, const ExpertsBackward& experts,
                  const std::function<void()>& meanwhile) override {
        meanwhile();
        experts({block(a, rows), g.drows, g.dxg, g});
    }

  private:
    ExpertBlock block(const MoeActs& a, int64_t rows) const {
        return {rows, a.counts, experts_, a.xg, a.yrows, a.experts};
    }
    int64_t experts_;
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_local_dispatcher(const ModelConfig& c) {
    return std::make_unique<LocalDispatcher>(c);
}

}  // namespace moetrain
