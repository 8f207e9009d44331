// Checkpoint directories without a live model (plain named tensors): atomic writing, stale
// temporaries, SIGKILL in the middle of writing, run-directory resolution, state.json, and
// the tensor-set checks (missing / extra / dtype / shape).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "io/atomic_dir.h"
#include "io/checkpoint_meta.h"
#include "io/checkpoint_tensors.h"
#include "io/checkpoint_write.h"
#include "io/file.h"
#include "moetrain/checkpoint.h"
#include "moetrain/safetensors.h"
#include "test_checkpoint_util.h"

namespace fs = std::filesystem;
using namespace moetrain;
using namespace moetrain::testing;

namespace {

std::vector<ParamInfo> make_params(const std::vector<std::pair<std::string, Shape>>& list) {
    std::vector<ParamInfo> out;
    int64_t offset = 0;
    for (const auto& [name, shape] : list) {
        ParamInfo p;
        p.name = name;
        p.shape = shape;
        p.offset = offset;
        offset += shape.numel();
        out.push_back(p);
    }
    return out;
}

int64_t total(const std::vector<ParamInfo>& params) {
    return params.empty() ? 0 : params.back().offset + params.back().numel();
}

std::vector<float> pattern(int64_t n, float base) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = base + 0.001f * static_cast<float>(i % 1000);
    return v;
}

// The data position write_plain stores for `step`: 100 tokens per step, or the step itself for
// the 19-digit steps, where 100 * step would overflow int64.
int64_t plain_train_pos(int64_t step) {
    return step <= INT64_MAX / 100 ? 100 * step : step;
}

// A checkpoint of plain tensors whose values all derive from `step`.
void write_plain(const std::string& dir, const std::vector<ParamInfo>& params, int64_t step,
                 OptimizerState opt = OptimizerState::adamw) {
    const int64_t n = total(params);
    std::vector<float> w = pattern(n, static_cast<float>(step)), m = pattern(n, -1.0f * step),
                       v = pattern(n, 0.5f * step);
    io::CheckpointBuffers b;
    b.params = &params;
    b.weights = &w;
    b.m = &m;
    b.v = &v;
    b.config_json = config_to_json(preset_config("tiny"));
    TrainState st;
    st.step = step;
    st.train_pos = plain_train_pos(step);
    if (opt == OptimizerState::sgd) st.options.optimizer = OptimizerKind::sgd;
    io::write_checkpoint_dir(dir, b, st, opt);
}

// The checkpoint in `dir` is complete and holds exactly what write_plain(step) wrote.
void check_plain(const std::string& dir, const std::vector<ParamInfo>& params, int64_t step) {
    CAPTURE(dir);
    CheckpointInfo info = read_checkpoint_info(dir);
    CHECK(info.state.step == step);
    CHECK(info.state.train_pos == plain_train_pos(step));
    CHECK(info.optimizer == OptimizerState::adamw);
    SafetensorsFile model(dir + "/model.safetensors");
    io::check_tensors(model, params, {""});
    CHECK(io::read_flat_tensors(model, params, "", total(params)) ==
          pattern(total(params), static_cast<float>(step)));
    SafetensorsFile opt(dir + "/optimizer.safetensors");
    io::check_tensors(opt, params, {"m.", "v."});
    CHECK(io::read_flat_tensors(opt, params, "v.", total(params)) ==
          pattern(total(params), 0.5f * step));
}

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

const auto kSmall =
    make_params({{"a.weight", Shape{4, 3}}, {"b.bias", Shape{5}}, {"c", Shape{2, 2, 2}}});

// Whether a directory entry is a checkpoint write's temporary directory, `<dir>.tmp-<pid>`.
bool is_partial(const std::string& name) {
    return name.find(".tmp-") != std::string::npos;
}

// Whether a checkpoint write into `run` is under way: its temporary directory exists.
bool write_in_progress(const std::string& run) {
    const std::vector<std::string> names = entries(run);
    return std::any_of(names.begin(), names.end(), is_partial);
}

}  // namespace

TEST_CASE("checkpoint: step directory names") {
    CHECK(step_dir_name(0) == "step_000000");
    CHECK(step_dir_name(42) == "step_000042");
    CHECK(step_dir_name(1234567) == "step_1234567");
    CHECK_THROWS_AS(step_dir_name(-1), Error);
}

TEST_CASE("checkpoint: atomic directory writer") {
    TempDir tmp;
    const std::string final_dir = tmp.file("run/step_000001");
    {
        io::AtomicDirWriter w(final_dir + "/");  // trailing slash is ignored
        CHECK(w.tmp_dir() == final_dir + ".tmp-" + std::to_string(::getpid()));
        io::write_file_synced(w.file("x.txt"), "one");
        CHECK(!fs::exists(final_dir));  // nothing visible before commit
        w.commit();
    }
    CHECK(slurp(final_dir + "/x.txt") == "one");
    CHECK(entries(tmp.file("run")) == std::vector<std::string>{"step_000001"});

    {  // not committed (an exception while writing): the temporary goes, nothing else changes
        io::AtomicDirWriter w(final_dir);
        io::write_file_synced(w.file("x.txt"), "two");
    }
    CHECK(slurp(final_dir + "/x.txt") == "one");
    CHECK(entries(tmp.file("run")) == std::vector<std::string>{"step_000001"});

    {  // replacing an existing directory swaps it as a whole
        io::AtomicDirWriter w(final_dir);
        io::write_file_synced(w.file("y.txt"), "three");
        w.commit();
    }
    CHECK(entries(final_dir) == std::vector<std::string>{"y.txt"});
    CHECK(entries(tmp.file("run")) == std::vector<std::string>{"step_000001"});

    spit(tmp.file("run/plain_file"), "x");
    io::AtomicDirWriter w(tmp.file("run/plain_file"));
    CHECK(error_of([&] { w.commit(); }).find("exists and is not a directory") != std::string::npos);
}

namespace {
// A temporary directory left by a process that died while writing `final_dir` (the child
// creates the writer and exits without unwinding); returns the dead process's pid.
pid_t leave_dead_tmp(const std::string& final_dir) {
    pid_t child = ::fork();
    if (child == 0) {
        new io::AtomicDirWriter(final_dir);  // never destroyed: _exit skips destructors
        ::_exit(0);
    }
    REQUIRE(child > 0);
    ::waitpid(child, nullptr, 0);  // `child` is now a pid of no process
    return child;
}
}  // namespace

TEST_CASE("checkpoint: stale temporaries of dead processes are ignored and removed") {
    TempDir tmp;
    write_plain(tmp.file("step_000001"), kSmall, 1);
    const pid_t child = leave_dead_tmp(tmp.file("step_000002"));
    const std::string dead = tmp.file("step_000002.tmp-" + std::to_string(child));
    const std::string mine = tmp.file("step_000003.tmp-" + std::to_string(::getpid()));
    REQUIRE(fs::is_directory(dead));
    fs::create_directories(mine);
    spit(dead + "/model.safetensors", "partial");
    spit(dead + "/state.json", "{");
    CHECK(resolve_checkpoint(tmp.path.string()) == tmp.file("step_000001"));
    CHECK(io::remove_stale_tmp_dirs(tmp.path.string()) == 1);
    CHECK(!fs::exists(dead));
    CHECK(fs::exists(mine));  // this process's own temporary may be in use
    // Writing the next checkpoint also cleans up.
    const std::string dead2 =
        tmp.file("step_000002.tmp-" + std::to_string(leave_dead_tmp(tmp.file("step_000002"))));
    REQUIRE(fs::is_directory(dead2));
    write_plain(tmp.file("step_000004"), kSmall, 4);
    CHECK(!fs::exists(dead2));
}

TEST_CASE("checkpoint: the cleaner never touches what this program did not make") {
    TempDir tmp;
    const pid_t gone = leave_dead_tmp(tmp.file("probe"));  // a pid of no process
    const std::string suffix = ".tmp-" + std::to_string(gone);
    // A user's folder with a temporary-looking name, and one holding a wrong marker.
    fs::create_directories(tmp.file("thesis" + suffix + "/chapter1"));
    spit(tmp.file("thesis" + suffix + "/chapter1/text.tex"), "precious");
    fs::create_directories(tmp.file("notes" + suffix));
    spit(tmp.file("notes" + suffix + "/.moetrain-partial"), "not our text");
    // A symlink with such a name pointing at a real left-over elsewhere: not followed.
    const std::string elsewhere = tmp.file("elsewhere");
    fs::create_directories(elsewhere);
    const std::string target =
        elsewhere + "/x.tmp-" + std::to_string(leave_dead_tmp(elsewhere + "/x"));
    REQUIRE(fs::is_directory(target));
    fs::create_symlink(target, tmp.file("link" + suffix));
    // A plain file with such a name.
    spit(tmp.file("file" + suffix), "data");
    const int removed = io::remove_stale_tmp_dirs(tmp.path.string());
    CHECK(removed == 1);  // only probe.tmp-<pid>, made by AtomicDirWriter
    CHECK(slurp(tmp.file("thesis" + suffix + "/chapter1/text.tex")) == "precious");
    CHECK(fs::exists(tmp.file("notes" + suffix + "/.moetrain-partial")));
    CHECK(fs::is_symlink(tmp.file("link" + suffix)));
    CHECK(fs::is_directory(target));
    CHECK(slurp(tmp.file("file" + suffix)) == "data");
    CHECK(!fs::exists(tmp.file("probe" + suffix)));
}

TEST_CASE("checkpoint: a committed directory holds only what was written into it") {
    TempDir tmp;
    write_plain(tmp.file("step_000001"), kSmall, 1);
    for (const std::string& name : entries(tmp.file("step_000001")))
        CHECK(name.find("moetrain-partial") == std::string::npos);
}

TEST_CASE("checkpoint: SIGKILL while writing never damages an earlier checkpoint") {
    TempDir tmp;
    const std::string run = tmp.file("run");
    // ~16 MB per checkpoint (model + two moments) so that the writer is killed mid-file.
    const auto big = make_params({{"emb", Shape{1024, 1024}}, {"w", Shape{4, 256, 256}}});
    write_plain(run + "/" + step_dir_name(1), big, 1);
    const std::string first_bytes = slurp(run + "/step_000001/model.safetensors");
    std::mt19937 rng(3);
    int killed_mid_write = 0;
    int64_t next_step = 2;
    for (int attempt = 0; attempt < 4; ++attempt) {
        pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {  // write checkpoints until killed
            for (int64_t s = next_step;; ++s) write_plain(run + "/" + step_dir_name(s), big, s);
        }
        // Kill inside a write: wait until the child's temporary directory exists (the child
        // first fills 16 MB of tensors, which a sanitizer build under load can take longer over
        // than any fixed sleep), then let the write go on for 0-9 ms (it may end, and the next
        // step's begin, in that time).
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!write_in_progress(run) && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 10));
        ::kill(child, SIGKILL);
        int status = 0;
        ::waitpid(child, &status, 0);
        CHECK(WIFSIGNALED(status));
        CAPTURE(attempt);
        // Every step_* directory is complete and exact; resolution picks the newest.
        int64_t newest = 0;
        for (const std::string& name : entries(run)) {
            if (is_partial(name)) {
                ++killed_mid_write;
                continue;
            }
            int64_t step = std::stoll(name.substr(5));
            check_plain(run + "/" + name, big, step);
            newest = std::max(newest, step);
        }
        CHECK(resolve_checkpoint(run) == run + "/" + step_dir_name(newest));
        CHECK(slurp(run + "/step_000001/model.safetensors") == first_bytes);
        io::remove_stale_tmp_dirs(run);
        next_step = newest + 1;
    }
    CHECK(killed_mid_write > 0);  // the kills did land inside a checkpoint write
}

TEST_CASE("checkpoint: resolve_checkpoint") {
    TempDir tmp;
    const std::string run = tmp.file("run");
    write_plain(run + "/step_000002", kSmall, 2);
    write_plain(run + "/step_000010", kSmall, 10);
    write_plain(run + "/step_000009", kSmall, 9);
    CHECK(resolve_checkpoint(run) == run + "/step_000010");
    CHECK(resolve_checkpoint(run + "/step_000002") == run + "/step_000002");
    // Ignored: incomplete directories, temporaries, names that are not step_ + 6+ digits.
    fs::create_directories(run + "/step_000011");
    spit(run + "/step_000011/model.safetensors", "");
    fs::create_directories(run + "/step_000012.tmp-99999999");
    fs::create_directories(run + "/step_13");
    fs::create_directories(run + "/notes");
    CHECK(resolve_checkpoint(run) == run + "/step_000010");
    write_plain(run + "/step_1000000", kSmall, 1000000);
    CHECK(resolve_checkpoint(run) == run + "/step_1000000");
    // The writer's names for the largest steps (19 digits) are found by the reader too;
    // 19 digits beyond int64 are not a step.
    write_plain(run + "/" + step_dir_name(1000000000000000001), kSmall, 1000000000000000001);
    CHECK(step_dir_name(1000000000000000001) == "step_1000000000000000001");
    CHECK(resolve_checkpoint(run) == run + "/step_1000000000000000001");
    fs::create_directories(run + "/step_9999999999999999999");
    spit(run + "/step_9999999999999999999/model.safetensors", "");
    spit(run + "/step_9999999999999999999/state.json", "");
    CHECK(resolve_checkpoint(run) == run + "/step_1000000000000000001");

    CHECK(error_of([&] { resolve_checkpoint(tmp.file("missing")); }) ==
          "checkpoint " + tmp.file("missing") + " not found");
    spit(tmp.file("file"), "x");
    CHECK(error_of([&] { resolve_checkpoint(tmp.file("file")); }) ==
          "checkpoint " + tmp.file("file") + " is not a directory");
    fs::create_directories(tmp.file("empty"));
    CHECK(error_of([&] {
              resolve_checkpoint(tmp.file("empty"));
          }).find("no checkpoint in " + tmp.file("empty")) == 0);
    CHECK(error_of([&] { resolve_checkpoint(run + "/step_000011"); }) ==
          "checkpoint " + run + "/step_000011 is incomplete: no state.json");
}

TEST_CASE("checkpoint: read_checkpoint_info and damaged directories") {
    TempDir tmp;
    const std::string ck = tmp.file("ck");
    write_plain(ck, kSmall, 7);
    CheckpointInfo info = read_checkpoint_info(ck);
    CHECK(info.dir == ck);
    CHECK(config_to_json(info.config) == config_to_json(preset_config("tiny")));
    CHECK(info.state.step == 7);
    CHECK(info.has_optimizer());
    CHECK(entries(ck) ==
          std::vector<std::string>{"model.safetensors", "optimizer.safetensors", "state.json"});

    write_plain(tmp.file("sgd"), kSmall, 3, OptimizerState::sgd);
    CHECK(entries(tmp.file("sgd")) == std::vector<std::string>{"model.safetensors", "state.json"});
    CHECK(read_checkpoint_info(tmp.file("sgd")).optimizer == OptimizerState::sgd);
    write_plain(tmp.file("weights"), kSmall, 3, OptimizerState::none);
    CHECK(!read_checkpoint_info(tmp.file("weights")).has_optimizer());

    CHECK(error_of([&] {
              read_checkpoint_info(tmp.file("nope"));
          }).find("checkpoint " + tmp.file("nope") + " not found") == 0);
    fs::remove(ck + "/optimizer.safetensors");
    CHECK(error_of([&] { read_checkpoint_info(ck); }) ==
          "checkpoint " + ck + ": missing optimizer.safetensors (state.json says adamw_moments)");
    fs::remove(ck + "/state.json");
    CHECK(error_of([&] { read_checkpoint_info(ck); }) ==
          "checkpoint " + ck + ": missing state.json");
    fs::remove(ck + "/model.safetensors");
    CHECK(error_of([&] { read_checkpoint_info(ck); }) ==
          "checkpoint " + ck + ": missing model.safetensors");

    // Metadata problems in model.safetensors.
    std::vector<float> w(static_cast<size_t>(total(kSmall)));
    const std::string mpath = tmp.file("weights/model.safetensors");
    auto rewrite = [&](const std::map<std::string, std::string>& meta) {
        SafetensorsWriter sw;
        io::add_flat_tensors(sw, kSmall, w, "");
        for (const auto& [k, v] : meta) sw.set_metadata(k, v);
        sw.write(mpath);
        reseal_checkpoint(tmp.file("weights"));
        return error_of([&] { read_checkpoint_info(tmp.file("weights")); });
    };
    const std::string tiny = config_to_json(preset_config("tiny"));
    CHECK(rewrite({{"config", tiny}}).find("metadata has no \"format\"") != std::string::npos);
    CHECK(rewrite({{"config", tiny}, {"format", "other-2"}})
              .find("format \"other-2\" is not \"moetrain-1\"") != std::string::npos);
    CHECK(rewrite({{"format", "moetrain-1"}}).find("metadata has no \"config\"") !=
          std::string::npos);
    CHECK(rewrite({{"format", "moetrain-1"}, {"config", "{\"d_model\": 4}"}}) ==
          "checkpoint file " + mpath + ": stored config: missing required key \"vocab_size\"");
    CHECK(rewrite({{"format", "moetrain-1"}, {"config", tiny}}) == "");
}

TEST_CASE("checkpoint: state.json round trip and rejection") {
    TrainState s;
    s.step = 12;
    s.train_pos = 4096;
    s.eval_pos = 64;
    s.seed = 0xFFFFFFFFFFFFFFFFull;
    s.rng_counter = 99;
    s.options.lr = 1e-3;
    s.options.min_lr = -1;  // resolved to lr / 10 when written
    s.options.warmup = 5;
    s.options.total_steps = 100;
    s.options.wd = 0.05;
    s.options.b1 = 0.8;
    s.options.b2 = 0.99;
    s.options.eps = 1e-7;
    s.options.clip = 0.5;
    s.options.accum = 3;
    s.batch = 8;
    s.seq = 64;
    s.data_path = "/data/x.txt";
    const std::string text = io::state_to_json(s, OptimizerState::adamw);
    OptimizerState opt;
    TrainState r = io::parse_state(text, "state.json", &opt);
    CHECK(opt == OptimizerState::adamw);
    CHECK(r.step == 12);
    CHECK(r.train_pos == 4096);
    CHECK(r.eval_pos == 64);
    CHECK(r.seed == s.seed);
    CHECK(r.rng_counter == 99);
    CHECK(r.options.optimizer == OptimizerKind::adamw);
    CHECK(r.options.lr == 1e-3);
    CHECK(r.options.min_lr == doctest::Approx(1e-4));
    CHECK(r.options.warmup == 5);
    CHECK(r.options.total_steps == 100);
    CHECK(r.options.wd == 0.05);
    CHECK(r.options.b1 == 0.8);
    CHECK(r.options.b2 == 0.99);
    CHECK(r.options.eps == 1e-7);
    CHECK(r.options.clip == 0.5);
    CHECK(r.options.accum == 3);
    CHECK(r.batch == 8);
    CHECK(r.seq == 64);
    CHECK(r.loss_scale == 1.0);
    CHECK(r.tokenizer == "bytes");
    CHECK(r.data_path == "/data/x.txt");
    CHECK(io::state_to_json(r, opt) == text);

    using nlohmann::json;
    auto reject = [&](const std::function<void(json&)>& edit) {
        json j = json::parse(text);
        edit(j);
        return error_of([&] { io::parse_state(j.dump(), "S", &opt); });
    };
    CHECK(reject([](json& j) { j["extra"] = 1; }).find("S: unknown key \"extra\"") == 0);
    CHECK(reject([](json& j) { j["format"] = "moetrain-0"; }) ==
          "S: \"format\" = \"moetrain-0\", expected \"moetrain-1\"");
    CHECK(reject([](json& j) { j["data"].erase("train_pos"); }) ==
          "S: missing required key \"data.train_pos\"");
    CHECK(reject([](json& j) { j["step"] = -1; }).find("S: \"step\" = -1 is out of range") == 0);
    CHECK(reject([](json& j) { j["rng"]["seed"] = "x"; }).find("S: \"rng.seed\" must be") == 0);
    CHECK(reject([](json& j) { j["train"]["optimizer"] = "sgd"; }) ==
          "S: \"optimizer_state\" = \"adamw_moments\" contradicts \"train.optimizer\" = \"sgd\"");
    CHECK(reject([](json& j) { j["optimizer_state"] = "full"; }).find("is not one of") !=
          std::string::npos);
    CHECK(error_of([&] { io::parse_state("{", "S", &opt); }).find("S: invalid JSON") == 0);
}

TEST_CASE("checkpoint: tensor set checks name the first problem") {
    TempDir tmp;
    const std::string path = tmp.file("t.safetensors");
    std::vector<float> w(100, 1.0f);
    auto check_with = [&](const std::function<void(SafetensorsWriter&)>& add) {
        SafetensorsWriter sw;
        add(sw);
        sw.write(path);
        SafetensorsFile f(path);
        return error_of([&] { io::check_tensors(f, kSmall, {""}); });
    };
    const std::string where = "checkpoint file " + path + ": ";
    CHECK(check_with([&](SafetensorsWriter& sw) { io::add_flat_tensors(sw, kSmall, w, ""); }) ==
          "");
    CHECK(check_with([&](SafetensorsWriter& sw) {
              sw.add("a.weight", DType::f32, {4, 3}, w.data());
              sw.add("c", DType::f32, {2, 2, 2}, w.data());
          }) == where + "missing tensor \"b.bias\"");
    CHECK(check_with([&](SafetensorsWriter& sw) {
              io::add_flat_tensors(sw, kSmall, w, "");
              sw.add("d", DType::f32, {1}, w.data());
          }) == where + "unexpected tensor \"d\" (not a parameter of this model)");
    CHECK(check_with([&](SafetensorsWriter& sw) {
              sw.add("a.weight", DType::f16, {4, 3}, w.data());
              sw.add("b.bias", DType::f32, {5}, w.data());
              sw.add("c", DType::f32, {2, 2, 2}, w.data());
          }) == where + "tensor \"a.weight\" has dtype F16, expected F32");
    CHECK(check_with([&](SafetensorsWriter& sw) {
              sw.add("a.weight", DType::f32, {3, 4}, w.data());
              sw.add("b.bias", DType::f32, {5}, w.data());
              sw.add("c", DType::f32, {2, 2, 2}, w.data());
          }) == where + "tensor \"a.weight\" has shape [3,4], the model expects [4,3]");
}
