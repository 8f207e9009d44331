// Checkpoint directories (api/moetrain/checkpoint.h, docs/CHECKPOINTS.md): atomic save,
// resolution of run directories to their newest complete step, validated loading of
// weights and optimizer state (AdamW moments, 8-bit AdamW codes + block absmax, restored
// exactly) through the public Model / Trainer API.
#include "moetrain/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "io/checkpoint_integrity.h"
#include "io/checkpoint_meta.h"
#include "io/checkpoint_tensors.h"
#include "io/checkpoint_write.h"
#include "io/file.h"
#include "moetrain/error.h"
#include "moetrain/safetensors.h"

namespace fs = std::filesystem;

namespace moetrain {
namespace {

using io::kModelFile;
using io::kOptimizerFile;
using io::kStateFile;

std::string join_path(const std::string& dir, const std::string& name) {
    return (fs::path(dir) / name).string();
}

bool is_file(const std::string& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec);
}

// A directory holding the files every checkpoint has.
bool is_complete_checkpoint(const std::string& dir) {
    return is_file(join_path(dir, kModelFile)) && is_file(join_path(dir, kStateFile));
}

void check_format(const SafetensorsFile& f) {
    auto it = f.metadata().find("format");
    MT_CHECK(it != f.metadata().end(), "checkpoint file ", f.path(),
             ": metadata has no \"format\" (not a moetrain checkpoint)");
    MT_CHECK(it->second == kCheckpointFormat, "checkpoint file ", f.path(), ": format \"",
             it->second, "\" is not \"", kCheckpointFormat, "\"");
}

ModelConfig stored_config(const SafetensorsFile& f) {
    check_format(f);
    auto it = f.metadata().find("config");
    MT_CHECK(it != f.metadata().end(), "checkpoint file ", f.path(),
             ": metadata has no \"config\"");
    try {
        return parse_config(it->second);
    } catch (const Error& e) {
        fail("checkpoint file ", f.path(), ": stored ", e.what());
    }
}

}  // namespace

std::string step_dir_name(int64_t step) {
    MT_CHECK(step >= 0, "negative checkpoint step ", step);
    char buf[32];
    std::snprintf(buf, sizeof buf, "step_%06lld", static_cast<long long>(step));
    return buf;
}

void save_checkpoint(const std::string& dir, const Model& model, const Trainer* trainer,
                     const TrainState& state) {
    TrainState st = state;
    st.precision = precision_name(model.precision());
    OptimizerState opt = OptimizerState::none;
    if (trainer) {
        st.step = trainer->steps_done();
        st.options = trainer->options();
        const bool fp16 = model.precision() == Precision::fp16;
        st.loss_scale = fp16 ? trainer->loss_scale() : 1.0;
        st.loss_scale_clean = fp16 ? trainer->clean_steps() : 0;
        st.skipped_steps = trainer->skipped_steps();
        opt = io::optimizer_state_of(st.options.optimizer);
    }
    io::CheckpointBuffers buffers;
    buffers.params = &model.params();
    const std::vector<float> weights = model.get_flat(model.params_flat());
    buffers.weights = &weights;
    std::vector<float> state_values;  // the expert biases (MODEL.md 6), when the model has them
    if (!model.buffers().empty()) {
        state_values.resize(static_cast<size_t>(model.buffers_flat().numel()));
        model.device().download(state_values.data(), model.buffers_flat());
        buffers.buffers = &model.buffers();
        buffers.buffer_values = &state_values;
    }
    buffers.config_json = config_to_json(model.config());
    std::vector<float> m, v;
    if (opt == OptimizerState::adamw) {
        MT_CHECK(!trainer->moment1().empty() && !trainer->moment2().empty(),
                 "AdamW trainer has no moment buffers to save");
        m = model.get_flat(trainer->moment1());
        v = model.get_flat(trainer->moment2());
        buffers.m = &m;
        buffers.v = &v;
    }
    std::vector<io::QuantizedHost> quantized;
    if (opt == OptimizerState::adamw8bit) {
        quantized = io::download_quantized(model.device(), trainer->quantized_moments());
        buffers.quantized = &quantized;
    }
    io::write_checkpoint_dir(dir, buffers, st, opt);
}

std::vector<StepDir> list_step_dirs(const std::string& run_dir, bool complete_only) {
    static const std::regex step_name(R"(step_([0-9]{6,19}))");  // also skips *.tmp-<pid>
    std::vector<StepDir> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
        const std::string name = entry.path().filename().string();
        std::smatch m;
        if (!std::regex_match(name, m, step_name)) continue;
        const std::string digits = m[1].str();
        int64_t step = 0;
        auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
        if (err != std::errc() || end != digits.data() + digits.size()) continue;  // > int64
        if (complete_only && !is_complete_checkpoint(entry.path().string())) continue;
        out.push_back({step, entry.path().string()});
    }
    MT_CHECK(!ec, "cannot list run directory ", run_dir, ": ", ec.message());
    std::sort(out.begin(), out.end(),
              [](const StepDir& a, const StepDir& b) { return a.step < b.step; });
    return out;
}

std::string resolve_checkpoint(const std::string& path) {
    std::error_code ec;
    MT_CHECK(fs::exists(path, ec), "checkpoint ", path, " not found");
    MT_CHECK(fs::is_directory(path, ec), "checkpoint ", path, " is not a directory");
    if (is_file(join_path(path, kModelFile)) || is_file(join_path(path, kStateFile))) {
        for (const char* name : {kModelFile, kStateFile})
            MT_CHECK(is_file(join_path(path, name)), "checkpoint ", path, " is incomplete: no ",
                     name);
        return path;
    }
    const std::vector<StepDir> steps = list_step_dirs(path, true);
    const std::string best = steps.empty() ? "" : steps.back().path;
    MT_CHECK(!best.empty(), "no checkpoint in ", path, ": it holds neither ", kModelFile, " + ",
             kStateFile, " nor complete step_NNNNNN checkpoint directories");
    return best;
}

CheckpointInfo read_checkpoint_info(const std::string& dir) {
    std::error_code ec;
    MT_CHECK(fs::is_directory(dir, ec), "checkpoint ", dir, " not found (not a directory)");
    CheckpointInfo info;
    info.dir = dir;
    for (const char* name : {kModelFile, kStateFile})
        MT_CHECK(is_file(join_path(dir, name)), "checkpoint ", dir, ": missing ", name);
    info.config = stored_config(SafetensorsFile(join_path(dir, kModelFile)));
    const std::string state_path = join_path(dir, kStateFile);
    info.state = io::parse_state(io::read_file(state_path, io::kCheckpointStateFile), state_path,
                                 &info.optimizer);
    const bool moments =
        info.optimizer == OptimizerState::adamw || info.optimizer == OptimizerState::adamw8bit;
    MT_CHECK(!moments || is_file(join_path(dir, kOptimizerFile)), "checkpoint ", dir, ": missing ",
             kOptimizerFile, " (state.json says ", io::optimizer_state_name(info.optimizer), ")");
    // Structure first (a missing file is named as such), then every checksum.
    const io::IntegrityReport integrity = io::verify_checkpoint_integrity(dir);
    info.checksummed = integrity.checksummed;
    MT_CHECK(!moments || !info.checksummed || integrity.files == 3, "checkpoint ", dir, ": ",
             kOptimizerFile, " has no checksum in ", kStateFile, " (corrupt file)");
    return info;
}

namespace {
// A flipped byte can turn a weight into NaN/Inf while every structural check passes: refuse
// such values, naming the tensor.
void check_finite(const std::vector<float>& flat, const std::vector<ParamInfo>& params,
                  const std::string& file, const char* prefix) {
    for (const ParamInfo& p : params)
        for (int64_t i = 0; i < p.numel(); ++i)
            MT_CHECK(std::isfinite(flat[static_cast<size_t>(p.offset + i)]), "checkpoint file ",
                     file, ": tensor \"", prefix, p.name, "\" holds a non-finite value at element ",
                     i, " (corrupt file)");
}

// AdamW's second moment is a running mean of squared gradients: a negative value is not a
// state any run can reach, and its square root would turn the next update into NaN.
void check_non_negative(const std::vector<float>& flat, const std::vector<ParamInfo>& params,
                        const std::string& file, const char* prefix) {
    for (const ParamInfo& p : params)
        for (int64_t i = 0; i < p.numel(); ++i)
            MT_CHECK(flat[static_cast<size_t>(p.offset + i)] >= 0.0f, "checkpoint file ", file,
                     ": tensor \"", prefix, p.name, "\" holds the negative second moment ",
                     flat[static_cast<size_t>(p.offset + i)], " at element ", i, " (corrupt file)");
}
}  // namespace

void load_weights(const std::string& dir, Model& model) {
    read_checkpoint_info(dir);  // state.json and the file set are part of a valid checkpoint
    SafetensorsFile f(join_path(dir, kModelFile));
    std::string diff = io::config_difference(stored_config(f), model.config());
    MT_CHECK(diff.empty(), "checkpoint file ", f.path(),
             ": config does not match the model: ", diff);
    std::vector<ParamInfo> all = model.params();  // the file holds exactly these tensors
    all.insert(all.end(), model.buffers().begin(), model.buffers().end());
    io::check_tensors(f, all, {""});
    std::vector<float> w = io::read_flat_tensors(f, model.params(), "", model.num_params());
    check_finite(w, model.params(), f.path(), "");
    std::vector<float> b;
    if (!model.buffers().empty()) {
        b = io::read_flat_tensors(f, model.buffers(), "", model.buffers_flat().numel());
        check_finite(b, model.buffers(), f.path(), "");
    }
    model.set_flat(model.params_flat(), w);
    if (!b.empty()) model.device().upload(model.buffers_flat(), b.data());
}

namespace {
// The 8-bit AdamW codes and block absmax, checked completely before anything is uploaded.
void load_quantized(const std::string& path, Trainer& trainer) {
    SafetensorsFile f(path);
    check_format(f);
    const Model& model = trainer.model();
    const std::map<std::string, std::string> want = {
        {"optimizer", optimizer_name(OptimizerKind::adamw8bit)},
        {"block_size", std::to_string(kAdamW8bitBlock)},
        {"layout", io::flat_layout(model.params())}};
    for (const auto& [key, value] : want)
        MT_CHECK(f.metadata_at(key) == value, "checkpoint file ", path, ": metadata \"", key,
                 "\" does not match this trainer (",
                 key == "layout" ? "another flat parameter layout" : f.metadata_at(key), ")");
    const std::vector<io::QuantizedHost> host =
        io::read_quantized_tensors(f, trainer.quantized_moments());
    size_t i = 0;
    for (const QuantizedMoments& q : trainer.quantized_moments()) {
        if (q.n == 0) continue;
        const io::QuantizedHost& h = host.at(i++);
        model.device().upload(q.m_codes, h.m_codes.data());
        model.device().upload(q.v_codes, h.v_codes.data());
        model.device().upload(q.m_absmax, h.m_absmax.data());
        model.device().upload(q.v_absmax, h.v_absmax.data());
    }
}
}  // namespace

void load_optimizer(const std::string& dir, Trainer& trainer) {
    CheckpointInfo info = read_checkpoint_info(dir);
    const std::string state_path = join_path(dir, kStateFile);
    MT_CHECK(info.optimizer != OptimizerState::none, "checkpoint ", dir, " holds weights only (",
             state_path, ": \"optimizer_state\" = \"weights_only\"); it cannot be resumed");
    const OptimizerKind kind = trainer.options().optimizer;
    MT_CHECK(io::optimizer_state_of(kind) == info.optimizer, "checkpoint ", dir,
             " was trained with ", optimizer_name(info.state.options.optimizer),
             ", the trainer uses ", optimizer_name(kind));
    if (kind == OptimizerKind::adamw8bit) load_quantized(join_path(dir, kOptimizerFile), trainer);
    if (kind == OptimizerKind::adamw) {
        Model& model = trainer.model();
        SafetensorsFile f(join_path(dir, kOptimizerFile));
        check_format(f);
        io::check_tensors(f, model.params(), {"m.", "v."});
        std::vector<float> m = io::read_flat_tensors(f, model.params(), "m.", model.num_params());
        std::vector<float> v = io::read_flat_tensors(f, model.params(), "v.", model.num_params());
        check_finite(m, model.params(), f.path(), "m.");
        check_finite(v, model.params(), f.path(), "v.");
        check_non_negative(v, model.params(), f.path(), "v.");
        model.set_flat(trainer.moment1(), m);
        model.set_flat(trainer.moment2(), v);
    }
    trainer.set_steps_done(info.state.step);
    // The fp16 loss scale continues where it was; any other saved precision has scale 1,
    // and a run switching to fp16 starts from the trainer's initial scale.
    const TrainState& s = info.state;
    if (s.precision == "fp16")
        trainer.set_loss_scale_state(s.loss_scale, s.loss_scale_clean, s.skipped_steps);
    else
        trainer.set_loss_scale_state(trainer.loss_scale(), 0, s.skipped_steps);
}

}  // namespace moetrain
