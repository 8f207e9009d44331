// Checkpoints of a real Model / Trainer on the cpu device: exact save/load round trip
// (weights, AdamW moments, step) and bit-identical continuation after resume; weights-only
// and SGD checkpoints; every load error (missing dir/file, truncated file, corrupt header,
// wrong dtype, wrong shape, missing/extra tensor, config mismatch) named in one line, with
// the model left untouched.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <random>

#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/safetensors.h"
#include "moetrain/train.h"
#include "checkpoint_run.h"
#include "test_checkpoint_util.h"

namespace fs = std::filesystem;
using namespace moetrain;
using namespace moetrain::testing;

namespace {

TrainOptions adamw_options() {
    TrainOptions o;
    o.lr = 1e-2;
    o.total_steps = 10;
    o.warmup = 2;
    return o;
}

using Run = CpuRun;

TrainState sample_state() {
    TrainState st;
    st.train_pos = 640;
    st.eval_pos = 32;
    st.seed = 5;
    st.batch = kB;
    st.seq = kT;
    st.data_path = "corpus.txt";
    return st;
}

}  // namespace

TEST_CASE("checkpoint: model round trip and bit-identical resume") {
    const ModelConfig c = preset_config("tiny");
    TempDir tmp;
    const std::string ck = tmp.file("run/" + step_dir_name(3));
    Run a(c, adamw_options(), 1, 3);
    save_checkpoint(ck, a.model, &a.trainer, sample_state());
    CHECK(resolve_checkpoint(tmp.file("run")) == ck);

    // File contents follow MODEL.md 6: every parameter once, F32, its shape; m./v. moments.
    SafetensorsFile mf(ck + "/model.safetensors");
    CHECK(mf.metadata_at("format") == "moetrain-1");
    CHECK(mf.metadata_at("config") == config_to_json(c));
    CHECK(mf.tensors().size() == a.model.params().size());
    CHECK(mf.read_f32("tok_emb.weight") == a.model.get_param("tok_emb.weight"));
    SafetensorsFile of(ck + "/optimizer.safetensors");
    CHECK(of.tensors().size() == 2 * a.model.params().size());
    const ParamInfo& router = a.model.param("layers.1.moe.router.weight");
    std::vector<float> m_all = a.model.get_flat(a.trainer.moment1());
    CHECK(of.read_f32("m.layers.1.moe.router.weight") ==
          std::vector<float>(m_all.begin() + router.offset,
                             m_all.begin() + router.offset + router.numel()));

    CheckpointInfo info = read_checkpoint_info(ck);
    CHECK(info.state.step == 3);
    CHECK(info.state.train_pos == 640);
    CHECK(info.state.options.lr == 1e-2);
    CHECK(info.state.options.warmup == 2);
    CHECK(info.optimizer == OptimizerState::adamw);

    Run b(c, adamw_options(), 99, 0);
    load_weights(ck, b.model);
    load_optimizer(ck, b.trainer);
    CHECK(b.trainer.steps_done() == 3);
    CHECK(b.weights() == a.weights());
    CHECK(b.model.get_flat(b.trainer.moment1()) == m_all);
    CHECK(b.model.get_flat(b.trainer.moment2()) == a.model.get_flat(a.trainer.moment2()));
    for (uint32_t s = 3; s < 6; ++s) CHECK(b.step(s) == a.step(s));
    CHECK(b.weights() == a.weights());

    // Saving the same step again replaces the directory atomically.
    save_checkpoint(ck, a.model, &a.trainer, sample_state());
    CHECK(read_checkpoint_info(ck).state.step == 6);
}

TEST_CASE("checkpoint: weights-only and SGD checkpoints") {
    const ModelConfig c = preset_config("tiny");
    TempDir tmp;
    Run a(c, adamw_options(), 1, 1);
    save_checkpoint(tmp.file("w"), a.model, nullptr, sample_state());
    CHECK(!fs::exists(tmp.file("w/optimizer.safetensors")));
    Run b(c, adamw_options(), 2, 0);
    load_weights(tmp.file("w"), b.model);
    CHECK(b.weights() == a.weights());
    CHECK(error_of([&] { load_optimizer(tmp.file("w"), b.trainer); }).find("holds weights only") !=
          std::string::npos);

    TrainOptions sgd = adamw_options();
    sgd.optimizer = OptimizerKind::sgd;
    Run s(c, sgd, 1, 2);
    save_checkpoint(tmp.file("sgd"), s.model, &s.trainer, sample_state());
    CHECK(!fs::exists(tmp.file("sgd/optimizer.safetensors")));
    CHECK(read_checkpoint_info(tmp.file("sgd")).optimizer == OptimizerState::sgd);
    Run s2(c, sgd, 7, 0);
    load_weights(tmp.file("sgd"), s2.model);
    load_optimizer(tmp.file("sgd"), s2.trainer);
    CHECK(s2.trainer.steps_done() == 2);
    CHECK(s2.step(2) == s.step(2));
    CHECK(error_of([&] {
              load_optimizer(tmp.file("sgd"), b.trainer);
          }).find("was trained with sgd, the trainer uses adamw") != std::string::npos);
}

TEST_CASE("checkpoint: every load error is one line and leaves the model untouched") {
    const ModelConfig c = preset_config("tiny");
    TempDir tmp;
    const std::string good = tmp.file("good");
    Run a(c, adamw_options(), 1, 1);
    save_checkpoint(good, a.model, &a.trainer, sample_state());
    Run b(c, adamw_options(), 2, 0);
    const std::vector<float> before = b.weights();

    // A fresh copy of the good checkpoint, damaged by `damage`; returns the load error.
    int copies = 0;
    auto load_damaged = [&](const std::function<void(const std::string&)>& damage,
                            bool optimizer = false) {
        const std::string dir = tmp.file("bad" + std::to_string(copies++));
        fs::copy(good, dir);
        damage(dir);
        reseal_checkpoint(dir);
        std::string msg = error_of([&] {
            if (optimizer)
                load_optimizer(dir, b.trainer);
            else
                load_weights(dir, b.model);
        });
        CHECK(msg.find('\n') == std::string::npos);
        CHECK(b.weights() == before);
        return msg;
    };
    auto model_file = [](const std::string& dir) { return dir + "/model.safetensors"; };
    auto contains = [](const std::string& msg, const std::string& part) {
        CAPTURE(msg);
        CAPTURE(part);
        CHECK(msg.find(part) != std::string::npos);
    };

    contains(error_of([&] { load_weights(tmp.file("missing"), b.model); }),
             "checkpoint " + tmp.file("missing") + " not found");
    contains(load_damaged([&](const std::string& d) { fs::remove(model_file(d)); }),
             "missing model.safetensors");
    contains(load_damaged([&](const std::string& d) { fs::remove(d + "/state.json"); }),
             "missing state.json");
    contains(load_damaged([&](const std::string& d) {
                 fs::resize_file(model_file(d), fs::file_size(model_file(d)) - 100);
             }),
             "truncated data");
    contains(load_damaged([&](const std::string& d) {
                 std::string bytes = slurp(model_file(d));
                 bytes.replace(8, 9, "#garbage#");
                 spit(model_file(d), bytes);
             }),
             "model.safetensors: header does not start with '{'");
    contains(load_damaged([&](const std::string& d) {
                 std::string bytes = slurp(model_file(d));
                 bytes[9] = '[';
                 spit(model_file(d), bytes);
             }),
             "model.safetensors: header: invalid JSON");
    contains(load_damaged([&](const std::string& d) {
                 rewrite(model_file(d), [](std::vector<RawTensor>& ts) {
                     ts[0].dtype = DType::i32;  // same byte size, wrong dtype
                 });
             }),
             "has dtype I32, expected F32");
    contains(load_damaged([&](const std::string& d) {
                 rewrite(model_file(d), [](std::vector<RawTensor>& ts) {
                     for (auto& t : ts)
                         if (t.name == "layers.0.attn.wk.weight") std::swap(t.shape[0], t.shape[1]);
                 });
             }),
             "tensor \"layers.0.attn.wk.weight\" has shape [64,32], the model expects [32,64]");
    contains(load_damaged([&](const std::string& d) {
                 rewrite(model_file(d), [](std::vector<RawTensor>& ts) {
                     std::erase_if(ts,
                                   [](const RawTensor& t) { return t.name == "norm_f.weight"; });
                 });
             }),
             "missing tensor \"norm_f.weight\"");
    contains(load_damaged([&](const std::string& d) {
                 rewrite(model_file(d), [](std::vector<RawTensor>& ts) {
                     RawTensor extra = ts.back();
                     extra.name = "lm_head.extra";
                     ts.push_back(extra);
                 });
             }),
             "unexpected tensor \"lm_head.extra\"");
    contains(
        load_damaged([&](const std::string& d) { fs::remove(d + "/optimizer.safetensors"); }, true),
        "missing optimizer.safetensors");
    contains(load_damaged(
                 [&](const std::string& d) {
                     rewrite(d + "/optimizer.safetensors", [](std::vector<RawTensor>& ts) {
                         std::erase_if(
                             ts, [](const RawTensor& t) { return t.name == "v.norm_f.weight"; });
                     });
                 },
                 true),
             "optimizer.safetensors: missing tensor \"v.norm_f.weight\"");

    // A model whose config differs: the first differing key is named.
    ModelConfig other = c;
    other.moe->z_loss_alpha = 0.5;
    Run o(other, adamw_options(), 3, 0);
    const std::vector<float> other_before = o.weights();
    CHECK(error_of([&] { load_weights(good, o.model); }) ==
          "checkpoint file " + good +
              "/model.safetensors: config does not match the model: "
              "\"moe.z_loss_alpha\" = 0.001 in the checkpoint, 0.5 in the model");
    CHECK(o.weights() == other_before);
    ModelConfig dense = c;
    dense.moe.reset();
    Run d(dense, adamw_options(), 3, 0);
    CHECK(error_of([&] { load_weights(good, d.model); }).find("\"moe\" = {") != std::string::npos);
}
