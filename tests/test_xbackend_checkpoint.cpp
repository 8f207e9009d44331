// A checkpoint written on one backend resumes on another and continues the same curve:
// N AdamW steps on backend A, save_checkpoint (weights, moments, step), then
// load_weights + load_optimizer into a fresh Model / Trainer on backend B and M more steps.
// The loaded weights and moments are bit-identical to what A saved, steps_done() is N, and
// the M losses match an uninterrupted N + M step run on A within rel 1e-4 per step (with
// identical expert loads). Both directions: reference -> other and other -> reference.
#include <doctest/doctest.h>

#include "moetrain/checkpoint.h"
#include "test_checkpoint_util.h"
#include "test_xbackend_util.h"

using namespace moetrain;
using namespace moetrain::xbackend;

namespace {

constexpr int kBefore = 6, kAfter = 6;
constexpr double kCurveTol = 1e-4;  // loss of each step, |a-b| / |b|

struct Run {
    Model model;
    Trainer trainer;
    Run(Device& dev, const ModelConfig& c)
        : model(dev, c), trainer(model, curve_options(kBefore + kAfter)) {}
    std::vector<float> flat(const Tensor& t) const { return model.get_flat(t); }
};

void check_resume(const ModelConfig& c, const test::DeviceUnderTest& from,
                  const test::DeviceUnderTest& to) {
    CAPTURE(from.id);
    CAPTURE(to.id);
    const auto stream = token_stream(c.vocab_size, 4096, 21);

    Run whole(*from.dev, c);  // uninterrupted run on the writing backend
    whole.model.init_weights(3);
    const auto want = train_steps(whole.trainer, stream, 0, kBefore + kAfter);

    Run first(*from.dev, c);
    first.model.init_weights(3);
    train_steps(first.trainer, stream, 0, kBefore);
    testing::TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    TrainState st;
    st.seed = 3;
    st.batch = kTrainB;
    st.seq = kTrainT;
    save_checkpoint(dir, first.model, &first.trainer, st);

    Run resumed(*to.dev, c);
    load_weights(dir, resumed.model);
    load_optimizer(dir, resumed.trainer);
    CHECK(resumed.trainer.steps_done() == kBefore);
    CHECK(resumed.flat(resumed.model.params_flat()) == first.flat(first.model.params_flat()));
    CHECK(resumed.flat(resumed.trainer.moment1()) == first.flat(first.trainer.moment1()));
    CHECK(resumed.flat(resumed.trainer.moment2()) == first.flat(first.trainer.moment2()));

    const auto got = train_steps(resumed.trainer, stream, kBefore, kAfter);
    const std::vector<StepRecord> tail(want.begin() + kBefore, want.end());
    const double worst = check_curves(got, tail, kCurveTol, from.id + " -> " + to.id);
    CHECK(got.back().loss < want.front().loss);
    MESSAGE("xbackend checkpoint " << from.id << " -> " << to.id << ": steps " << kBefore + 1
                                   << ".." << kBefore + kAfter << " after resume, loss "
                                   << got.front().loss << " -> " << got.back().loss
                                   << ", worst step rel " << worst);
}

}  // namespace

TEST_CASE("xbackend: checkpoint saved on cpu resumes on the other backend and back, same curve") {
    const ModelConfig c = config_moe_softmax().cfg;
    for (const DevicePair& pr : device_pairs("checkpoint resume")) {
        check_resume(c, pr.ref, pr.other);
        check_resume(c, pr.other, pr.ref);
    }
}
