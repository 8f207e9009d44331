// Writes the checkpoints that tests/safetensors_reader.py (an independent stdlib-only reader)
// checks: several configs covering every parameter-name rule of MODEL.md 6, AdamW / SGD /
// weights-only, each with an expected.json of per-tensor sums. With MOETRAIN_IO_FIXTURE_DIR
// set (ctest fixture from tests/io_tests.cmake) they go there; otherwise into a temporary
// directory, where this test reads them back itself.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/train.h"
#include "test_checkpoint_util.h"

namespace fs = std::filesystem;
using namespace moetrain;
using namespace moetrain::testing;

namespace {

// Layernorm with biases, learned positions, gelu, tied embeddings, multi-head attention.
const char* kGptLike = R"({"vocab_size": 300, "d_model": 32, "n_layers": 2, "n_heads": 4,
    "n_kv_heads": 4, "max_seq_len": 16, "norm": "layernorm", "pos": "learned", "ffn": "gelu",
    "d_ff": 64, "bias": true, "tie_embeddings": true})";
// Hash routing (no router weights), relu experts, 2 shared experts, a dense first layer.
const char* kHashMoe = R"({"vocab_size": 256, "d_model": 32, "n_layers": 3, "n_heads": 2,
    "head_dim": 16, "max_seq_len": 16, "ffn": "relu", "d_ff": 32,
    "moe": {"n_experts": 3, "router": "hash", "n_shared_experts": 2, "first_layer": 1}})";

// The v2 routing options: sigmoid router, expert bias (a non-trained tensor per MoE layer),
// routed scaling and capacity; a dense first layer.
const char* kSigmoidBiasMoe = R"({"vocab_size": 256, "d_model": 32, "n_layers": 3, "n_heads": 2,
    "max_seq_len": 16, "d_ff": 32, "moe": {"n_experts": 4, "top_k": 2, "router": "sigmoid_topk",
    "first_layer": 1, "routed_scaling": 2.5, "bias_update_rate": 0.01, "capacity_factor": 1.25}})";

double sum_of(const std::vector<float>& v, int64_t offset, int64_t n) {
    return std::accumulate(v.begin() + offset, v.begin() + offset + n, 0.0);
}

// Train `steps` steps (if a trainer is used), save, and write expected.json next to it.
void write_case(const std::string& root, const std::string& name, const ModelConfig& c,
                const TrainOptions* opts, int steps) {
    auto dev = open_device("cpu");
    Model model(*dev, c);
    model.init_weights(11);
    std::unique_ptr<Trainer> trainer;
    if (opts) trainer = std::make_unique<Trainer>(model, *opts);
    std::mt19937 rng(5);
    std::vector<int32_t> x(32), y(32);
    for (int s = 0; s < steps; ++s) {
        for (auto& t : x) t = static_cast<int32_t>(rng() % 256);
        for (auto& t : y) t = static_cast<int32_t>(rng() % 256);
        trainer->step(x.data(), y.data(), 2, 16);
    }
    TrainState st;
    st.step = steps;
    st.train_pos = 64 * steps;
    st.batch = 2;
    st.seq = 16;
    const std::string dir = root + "/" + name;
    save_checkpoint(dir, model, trainer.get(), st);

    nlohmann::json sums = nlohmann::json::object();
    const auto w = model.get_flat(model.params_flat());
    for (const auto& p : model.params()) sums[p.name] = sum_of(w, p.offset, p.numel());
    for (const auto& b : model.buffers()) {
        const std::vector<float> v = model.get_buffer(b.name);
        sums[b.name] = sum_of(v, 0, b.numel());
    }
    if (trainer && opts->optimizer == OptimizerKind::adamw) {
        const auto m = model.get_flat(trainer->moment1()), v = model.get_flat(trainer->moment2());
        for (const auto& p : model.params()) {
            sums["m." + p.name] = sum_of(m, p.offset, p.numel());
            sums["v." + p.name] = sum_of(v, p.offset, p.numel());
        }
    }
    nlohmann::json expected = {{"step", steps}, {"sums", sums}};
    std::ofstream(dir + "/expected.json") << expected.dump(1);
}

}  // namespace

TEST_CASE("checkpoint: fixture for the independent python reader") {
    const char* env = std::getenv("MOETRAIN_IO_FIXTURE_DIR");
    TempDir tmp;
    const std::string root = env && *env ? std::string(env) : tmp.path.string();
    TrainOptions adamw;
    TrainOptions sgd;
    sgd.optimizer = OptimizerKind::sgd;
    write_case(root, "tiny_adamw", preset_config("tiny"), &adamw, 2);
    write_case(root, "gpt_like_adamw", parse_config(kGptLike), &adamw, 1);
    write_case(root, "hash_moe_sgd", parse_config(kHashMoe), &sgd, 1);
    write_case(root, "hash_moe_weights", parse_config(kHashMoe), nullptr, 0);
    write_case(root, "sigmoid_bias_adamw", parse_config(kSigmoidBiasMoe), &adamw, 3);
    for (const char* name : {"tiny_adamw", "gpt_like_adamw", "hash_moe_sgd", "hash_moe_weights",
                             "sigmoid_bias_adamw"}) {
        CAPTURE(name);
        CheckpointInfo info = read_checkpoint_info(root + "/" + name);
        CHECK(fs::exists(root + "/" + name + "/expected.json"));
        CHECK(info.has_optimizer() == (std::string(name).find("weights") == std::string::npos));
    }
}
