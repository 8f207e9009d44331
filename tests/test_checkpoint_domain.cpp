// Checkpoints whose structure and checksums are intact but whose values are outside the
// state's domain (as a buggy or hostile writer can produce): refused on load with one line
// naming the file and the tensor or key, never resumed into NaN weights.
#include <doctest/doctest.h>

#include "io/checkpoint_meta.h"
#include "io/checkpoint_write.h"
#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/train.h"
#include "test_checkpoint_util.h"

using namespace moetrain;
using namespace moetrain::testing;

namespace {

ModelConfig small_config() {
    ModelConfig c = preset_config("tiny");
    return c;
}

}  // namespace

TEST_CASE("checkpoint domain: a negative AdamW second moment is refused, naming the tensor") {
    TempDir tmp;
    auto dev = open_device("cpu");
    Model model(*dev, small_config());
    model.init_weights(3);
    TrainOptions o;
    Trainer trainer(model, o);
    const std::vector<float> w = model.get_flat(model.params_flat());
    std::vector<float> m(w.size(), 0.0f), v(w.size(), 1e-6f);
    const ParamInfo& victim = model.params().back();
    v[static_cast<size_t>(victim.offset + 1)] = -0.25f;
    io::CheckpointBuffers b;
    b.params = &model.params();
    b.weights = &w;
    b.m = &m;
    b.v = &v;
    b.config_json = config_to_json(model.config());
    TrainState st;
    st.step = 4;
    st.batch = 2;
    st.seq = 8;
    io::write_checkpoint_dir(tmp.file("ck"), b, st, OptimizerState::adamw);
    const std::string err = error_of([&] { load_optimizer(tmp.file("ck"), trainer); });
    CHECK(err.find("optimizer.safetensors") != std::string::npos);
    CHECK(err.find("\"v." + victim.name + "\"") != std::string::npos);
    CHECK(err.find("negative second moment") != std::string::npos);
    CHECK(trainer.steps_done() == 0);  // nothing was restored
}

TEST_CASE("checkpoint domain: state.json hyper-parameters outside their domain are refused") {
    TrainState st;
    st.batch = 2;
    st.seq = 8;
    const std::string good = io::state_to_json(st, OptimizerState::adamw);
    OptimizerState opt{};
    CHECK_NOTHROW(io::parse_state(good, "state.json", &opt));
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"\"b2\": 0.95", "\"b2\": 1.5"},  {"\"b1\": 0.9", "\"b1\": -0.1"},
        {"\"eps\": 1e-08", "\"eps\": 0"}, {"\"lr\": 0.0003", "\"lr\": -1"},
        {"\"wd\": 0.1", "\"wd\": -0.1"},  {"\"clip\": 1.0", "\"clip\": -2"}};
    for (const auto& [from, to] : bad) {
        CAPTURE(to);
        std::string text = good;
        const size_t at = text.find(from);
        REQUIRE(at != std::string::npos);
        text.replace(at, from.size(), to);
        const std::string err = error_of([&] { io::parse_state(text, "state.json", &opt); });
        CHECK(err.find("outside its domain") != std::string::npos);
        CHECK(err.find("state.json") == 0);
    }
}
