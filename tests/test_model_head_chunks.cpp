// The output head computes logits in row chunks (bounded buffer). With a tiny budget (3 rows
// per chunk, a partial last chunk) loss, gradients and logits equal the single-chunk results;
// the chunk fits the device's largest buffer and inference workspaces keep a smaller one.
#include <doctest/doctest.h>

#include <cmath>

#include "model/model_access.h"
#include "model/model_impl.h"
#include "moetrain/profiling.h"
#include "op_test_util.h"
#include "planning/planning_device.h"
#include "reference_model.h"

using namespace moetrain;
namespace rm = moetrain::refmodel;

TEST_CASE("model: chunked logits give the same loss, gradients and logits") {
    ModelConfig c = rm::small_config();
    c.tie_embeddings = true;  // the head gradient lands in tok_emb together with the embedding's
    test::for_each_test_device([&](Device& dev) {
        Model whole(dev, c), chunked(dev, c);
        ModelAccess::impl(chunked).workspaces.logit_budget =
            3 * c.vocab_size;  // 3 rows per chunk: 16 = 5 x 3 + 1
        rm::randomize_weights(whole, 4);
        rm::randomize_weights(chunked, 4);
        const rm::Batch b = rm::random_batch(c.vocab_size, 2, 8, 6, 4);
        whole.zero_grads();
        chunked.zero_grads();
        const LossStats lw = whole.forward_backward(b.x.data(), b.y.data(), 2, 8);
        const LossStats lc = chunked.forward_backward(b.x.data(), b.y.data(), 2, 8);
        CHECK(ModelAccess::impl(chunked).workspaces.get(2, 8, true).logit_rows == 3);
        CHECK(lc.ce == doctest::Approx(lw.ce).epsilon(1e-6));
        const std::vector<float> gw = whole.get_flat(whole.grads_flat());
        const std::vector<float> gc = chunked.get_flat(chunked.grads_flat());
        double worst = 0, gmax = 0;
        for (size_t i = 0; i < gw.size(); ++i) {
            worst = std::max(worst, double{std::abs(gw[i] - gc[i])});
            gmax = std::max(gmax, double{std::abs(gw[i])});
        }
        CHECK(worst <= 1e-6 * gmax);
        const std::vector<float> xw = whole.forward_logits(b.x.data(), 2, 8);
        const std::vector<float> xc = chunked.forward_logits(b.x.data(), 2, 8);
        REQUIRE(xw.size() == xc.size());
        double lworst = 0;
        for (size_t i = 0; i < xw.size(); ++i)
            lworst = std::max(lworst, double{std::abs(xw[i] - xc[i])});
        CHECK(lworst < 1e-5);
    });
}

namespace {
// A device whose largest single buffer is `max_bytes` (as an OpenCL device's
// CL_DEVICE_MAX_MEM_ALLOC_SIZE), allocating through the wrapped one.
class SmallBufferDevice : public ProfilingDevice {
  public:
    SmallBufferDevice(Device& inner, size_t max_bytes) : ProfilingDevice(inner), max_(max_bytes) {}
    size_t max_buffer_bytes() const override { return max_; }

  private:
    size_t max_;
};
}  // namespace

TEST_CASE("model: the logits chunk fits the device's largest buffer and the inference bound") {
    ModelConfig c = rm::small_config();
    std::unique_ptr<Device> cpu = open_device("cpu");
    SmallBufferDevice small(*cpu, 5 * static_cast<size_t>(c.vocab_size) * sizeof(float) + 7);
    Model m(small, c);
    const rm::Batch b = rm::random_batch(c.vocab_size, 2, 8, 6, 4);
    m.zero_grads();
    m.forward_backward(b.x.data(), b.y.data(), 2, 8);  // 16 rows in chunks of 5
    auto& cache = ModelAccess::impl(m).workspaces;
    CHECK(cache.get(2, 8, true).logit_rows == 5);
    CHECK(cache.get(2, 9, false).logit_rows == 5);
    // A lowered training bound also bounds inference (the smaller of the two).
    Model low(*cpu, c);
    auto& low_cache = ModelAccess::impl(low).workspaces;
    low_cache.logit_budget = 4 * c.vocab_size;
    CHECK(low_cache.get(2, 8, true).logit_rows == 4);
    CHECK(low_cache.get(3, 8, false).logit_rows == 4);
    // At a real vocabulary (planned, nothing allocated): inference workspaces keep at most
    // kInferenceLogitBudget logits, training ones kLogitBudget.
    ModelConfig big = c;
    big.vocab_size = 50304;
    PlanningDevice planner;
    Model planned(planner, big);
    auto& planned_cache = ModelAccess::impl(planned).workspaces;
    CHECK(planned_cache.get(16, 1024, true).logit_rows == kLogitBudget / 50304);
    CHECK(planned_cache.get(16, 1023, false).logit_rows == kInferenceLogitBudget / 50304);
}
