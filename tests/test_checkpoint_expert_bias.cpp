// Checkpoints of MODEL.md v2 routing on the cpu device: `layers.{l}.moe.router.expert_bias`
// is in model.safetensors exactly when moe.bias_update_rate > 0 (never in the optimizer
// state), a resumed run continues the bias bit for bit, a checkpoint written before v2 (no
// routing keys in its config) loads as the softmax router without bias or capacity, and a
// missing or non-finite bias is refused in one line.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/safetensors.h"
#include "moetrain/train.h"
#include "nlohmann/json.hpp"
#include "checkpoint_run.h"
#include "test_checkpoint_util.h"

using namespace moetrain;
using namespace moetrain::testing;

namespace {

ModelConfig biased(double rate) {
    ModelConfig c = preset_config("tiny");
    c.moe->router = RouterKind::sigmoid_topk;
    c.moe->bias_update_rate = rate;
    c.moe->capacity_factor = 1.0;
    c.moe->routed_scaling = 1.5;
    return c;
}

TrainOptions options() {
    TrainOptions o;
    o.lr = 1e-2;
    o.total_steps = 10;
    return o;
}

// A CpuRun with options(); bias() is every expert bias, layer by layer.
struct Run : CpuRun {
    Run(const ModelConfig& c, uint64_t seed, int steps) : CpuRun(c, options(), seed, steps) {}
    std::vector<float> bias() const {
        std::vector<float> v;
        for (const ParamInfo& b : model.buffers()) {
            const std::vector<float> one = model.get_buffer(b.name);
            v.insert(v.end(), one.begin(), one.end());
        }
        return v;
    }
};

}  // namespace

TEST_CASE("checkpoint: the expert bias is saved, loaded and continued bit for bit") {
    TempDir tmp;
    const std::string ck = tmp.file("ck");
    Run a(biased(0.01), 1, 3);
    const std::vector<float> bias3 = a.bias();
    CHECK(bias3 != std::vector<float>(bias3.size(), 0.0f));  // three updates moved it
    save_checkpoint(ck, a.model, &a.trainer, TrainState{});
    SafetensorsFile mf(ck + "/model.safetensors");
    CHECK(mf.tensors().size() == a.model.params().size() + 1);  // tiny: MoE layer 1
    CHECK(mf.read_f32("layers.1.moe.router.expert_bias") ==
          a.model.get_buffer("layers.1.moe.router.expert_bias"));
    SafetensorsFile of(ck + "/optimizer.safetensors");
    CHECK(of.tensors().size() == 2 * a.model.params().size());  // no moments for the bias

    Run b(biased(0.01), 99, 0);
    load_weights(ck, b.model);
    load_optimizer(ck, b.trainer);
    CHECK(b.bias() == bias3);
    for (uint32_t s = 3; s < 6; ++s) CHECK(b.step(s) == a.step(s));
    CHECK(b.bias() == a.bias());
    CHECK(b.model.get_flat(b.model.params_flat()) == a.model.get_flat(a.model.params_flat()));

    // Without an update rate there is no bias tensor at all.
    Run c(biased(0.0), 1, 1);
    CHECK(c.model.buffers().empty());
    save_checkpoint(tmp.file("nobias"), c.model, &c.trainer, TrainState{});
    CHECK(SafetensorsFile(tmp.file("nobias/model.safetensors")).tensors().size() ==
          c.model.params().size());
}

TEST_CASE("checkpoint: a checkpoint from before v2 loads as softmax, no bias, no capacity") {
    TempDir tmp;
    const std::string ck = tmp.file("old");
    Run a(preset_config("tiny"), 1, 1);
    save_checkpoint(ck, a.model, &a.trainer, TrainState{});
    rewrite(
        ck + "/model.safetensors", [](std::vector<RawTensor>&) {},
        [](std::map<std::string, std::string>& meta) {
            auto j = nlohmann::json::parse(meta.at("config"));
            for (const char* key : {"routed_scaling", "bias_update_rate", "capacity_factor"})
                j["moe"].erase(key);
            meta["config"] = j.dump();
        });
    reseal_checkpoint(ck);
    const CheckpointInfo info = read_checkpoint_info(ck);
    REQUIRE(info.config.moe);
    CHECK(info.config.moe->router == RouterKind::softmax_topk);
    CHECK(info.config.moe->bias_update_rate == 0.0);
    CHECK(info.config.moe->capacity_factor == 0.0);
    CHECK(info.config.moe->routed_scaling == 1.0);
    Run b(info.config, 7, 0);
    load_weights(ck, b.model);
    CHECK(b.model.get_flat(b.model.params_flat()) == a.model.get_flat(a.model.params_flat()));
    CHECK(b.model.buffers().empty());
}

TEST_CASE("checkpoint: a missing or non-finite expert bias is refused in one line") {
    TempDir tmp;
    const std::string good = tmp.file("good");
    Run a(biased(0.01), 1, 1);
    save_checkpoint(good, a.model, &a.trainer, TrainState{});
    Run b(biased(0.01), 2, 0);
    const std::vector<float> before = b.bias();
    int copies = 0;
    auto load_edited = [&](const std::function<void(std::vector<RawTensor>&)>& edit) {
        const std::string dir = tmp.file("bad" + std::to_string(copies++));
        std::filesystem::copy(good, dir);
        rewrite(dir + "/model.safetensors", edit);
        reseal_checkpoint(dir);
        const std::string msg = error_of([&] { load_weights(dir, b.model); });
        CHECK(msg.find('\n') == std::string::npos);
        CHECK(b.bias() == before);
        return msg;
    };
    const std::string missing = load_edited([](std::vector<RawTensor>& ts) {
        std::erase_if(
            ts, [](const RawTensor& t) { return t.name == "layers.1.moe.router.expert_bias"; });
    });
    CHECK(missing.find("missing tensor \"layers.1.moe.router.expert_bias\"") != std::string::npos);
    const std::string nan = load_edited([](std::vector<RawTensor>& ts) {
        for (RawTensor& t : ts)
            if (t.name == "layers.1.moe.router.expert_bias") {
                const float v = std::nanf("");
                std::memcpy(t.bytes.data(), &v, sizeof v);
            }
    });
    CAPTURE(nan);
    CHECK(nan.find("layers.1.moe.router.expert_bias") != std::string::npos);
}
