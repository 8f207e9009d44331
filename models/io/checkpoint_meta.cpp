// state.json writing/parsing (strict: unknown keys and wrong types rejected, naming the key)
// and the first-difference report between two configs.
#include "io/checkpoint_meta.h"

#include <climits>
#include <limits>

#include "io/json.h"
#include "moetrain/error.h"

namespace moetrain::io {
namespace {

// Indexed by OptimizerState / OptimizerKind / Precision.
const std::vector<std::string> kOptStates = {"weights_only", "sgd_no_moments", "adamw_moments",
                                             "adamw8bit_moments"};
const std::vector<std::string> kOptimizers = {optimizer_name(OptimizerKind::adamw),
                                              optimizer_name(OptimizerKind::sgd),
                                              optimizer_name(OptimizerKind::adamw8bit)};
const std::vector<std::string> kPrecisions = {precision_name(Precision::fp32),
                                              precision_name(Precision::bf16),
                                              precision_name(Precision::fp16)};

// First path at which a and b differ ("" if equal); `prefix` is the dotted path so far.
std::string first_difference(const json& a, const json& b, const std::string& prefix) {
    if (a.is_object() && b.is_object()) {
        for (const auto& item : a.items()) {
            const std::string key = prefix + item.key();
            if (!b.contains(item.key()))
                return detail::concat("\"", key, "\" is missing in the model");
            std::string d = first_difference(item.value(), b.at(item.key()), key + ".");
            if (!d.empty()) return d;
        }
        for (const auto& item : b.items())
            if (!a.contains(item.key()))
                return detail::concat("\"", prefix, item.key(), "\" is missing in the checkpoint");
        return "";
    }
    if (a == b) return "";
    return detail::concat("\"", prefix.substr(0, prefix.size() - 1), "\" = ", a.dump(),
                          " in the checkpoint, ", b.dump(), " in the model");
}

}  // namespace

std::string optimizer_state_name(OptimizerState s) {
    return kOptStates.at(static_cast<size_t>(s));
}

OptimizerState optimizer_state_of(OptimizerKind k) {
    switch (k) {
        case OptimizerKind::adamw:
            return OptimizerState::adamw;
        case OptimizerKind::sgd:
            return OptimizerState::sgd;
        case OptimizerKind::adamw8bit:
            return OptimizerState::adamw8bit;
    }
    fail("unknown OptimizerKind ", static_cast<int>(k));
}

std::string state_to_json(const TrainState& s, OptimizerState opt) {
    const TrainOptions& o = s.options;
    ordered_json j;
    j["format"] = kCheckpointFormat;
    j["step"] = s.step;
    j["optimizer_state"] = optimizer_state_name(opt);
    j["precision"] = s.precision;
    j["loss_scale"] = s.loss_scale;
    j["loss_scale_clean_steps"] = s.loss_scale_clean;
    j["skipped_steps"] = s.skipped_steps;
    j["rng"] = {{"seed", s.seed}, {"counter", s.rng_counter}};
    j["data"] = {{"tokenizer", s.tokenizer},
                 {"path", s.data_path},
                 {"tokens", s.data_tokens},
                 {"train_pos", s.train_pos},
                 {"eval_pos", s.eval_pos}};
    if (!s.tokenizer_sha256.empty()) j["data"]["tokenizer_sha256"] = s.tokenizer_sha256;
    if (!s.tokenizer_pattern.empty()) j["data"]["tokenizer_pattern"] = s.tokenizer_pattern;
    if (s.shuffle_seed >= 0) j["data"]["shuffle"] = s.shuffle_seed;
    if (s.val_tokens >= 0) j["data"]["val_tokens"] = s.val_tokens;
    j["train"] = {{"optimizer", kOptimizers.at(static_cast<size_t>(o.optimizer))},
                  {"lr", o.lr},
                  {"min_lr", o.min_lr < 0 ? o.lr / 10 : o.min_lr},
                  {"warmup", o.warmup},
                  {"total_steps", o.total_steps},
                  {"wd", o.wd},
                  {"b1", o.b1},
                  {"b2", o.b2},
                  {"eps", o.eps},
                  {"clip", o.clip},
                  {"accum", o.accum},
                  {"batch", s.batch},
                  {"seq", s.seq}};
    return j.dump(2) + "\n";
}

TrainState parse_state(const std::string& text, const std::string& where, OptimizerState* opt) {
    json j = parse_json_strict(text, where);
    JsonFields top(j, where, "",
                   {"format", "step", "optimizer_state", "precision", "loss_scale",
                    "loss_scale_clean_steps", "skipped_steps", "rng", "data", "train",
                    "checksums"});  // "checksums": checkpoint_integrity.h
    std::string format = top.string("format");
    MT_CHECK(format == kCheckpointFormat, where, ": \"format\" = \"", format, "\", expected \"",
             kCheckpointFormat, "\"");
    TrainState s;
    s.step = top.integer("step", 0, INT64_MAX);
    *opt = static_cast<OptimizerState>(top.choice("optimizer_state", kOptStates));
    // precision and the fp16 counters are optional (checkpoints written before they existed
    // were all fp32).
    s.precision = kPrecisions.at(top.choice("precision", kPrecisions, 0));
    s.loss_scale = top.number("loss_scale");
    MT_CHECK(s.loss_scale > 0, where, ": \"loss_scale\" must be > 0 (got ", s.loss_scale, ")");
    s.loss_scale_clean = top.integer("loss_scale_clean_steps", 0, 0, INT64_MAX);
    s.skipped_steps = top.integer("skipped_steps", 0, 0, INT64_MAX);

    JsonFields rng(top.object("rng"), where, "rng.", {"seed", "counter"});
    s.seed = rng.unsigned_integer("seed");
    s.rng_counter = rng.unsigned_integer("counter");

    JsonFields data(top.object("data"), where, "data.",
                    {"tokenizer", "path", "tokens", "train_pos", "eval_pos", "tokenizer_sha256",
                     "tokenizer_pattern", "shuffle", "val_tokens"});
    s.tokenizer = data.string("tokenizer");
    s.tokenizer_sha256 = data.string("tokenizer_sha256", "");
    s.tokenizer_pattern = data.string("tokenizer_pattern", "");
    s.shuffle_seed = data.integer("shuffle", -1, 0, INT64_MAX);
    s.val_tokens = data.integer("val_tokens", -1, 0, INT64_MAX);
    MT_CHECK(s.tokenizer == "bytes" || !s.tokenizer_sha256.empty(), where,
             ": \"data.tokenizer_sha256\" is missing for tokenizer \"", s.tokenizer, "\"");
    s.data_path = data.string("path");
    s.data_tokens = data.integer("tokens", 0, INT64_MAX);
    s.train_pos = data.integer("train_pos", 0, INT64_MAX);
    s.eval_pos = data.integer("eval_pos", 0, INT64_MAX);

    JsonFields tr(top.object("train"), where, "train.",
                  {"optimizer", "lr", "min_lr", "warmup", "total_steps", "wd", "b1", "b2", "eps",
                   "clip", "accum", "batch", "seq"});
    TrainOptions& o = s.options;
    o.optimizer = static_cast<OptimizerKind>(tr.choice("optimizer", kOptimizers));
    o.lr = tr.number("lr");
    o.min_lr = tr.number("min_lr");
    o.warmup = tr.integer("warmup", 0, INT64_MAX);
    o.total_steps = tr.integer("total_steps", 0, INT64_MAX);
    o.wd = tr.number("wd");
    o.b1 = tr.number("b1");
    o.b2 = tr.number("b2");
    o.eps = tr.number("eps");
    o.clip = tr.number("clip");
    o.accum = static_cast<int>(tr.integer("accum", 1, INT_MAX));
    // The same domains the CLI accepts for these options: a resumed run adopts them.
    auto in_range = [&](const char* key, double v, double lo, double hi, bool open_lo) {
        const bool ok = (open_lo ? v > lo : v >= lo) && v <= hi;
        if (!ok)
            tr.fail_key(key, detail::concat("= ", v, " is outside its domain ", open_lo ? "(" : "[",
                                            lo, ", ", hi, "]"));
    };
    const double inf = std::numeric_limits<double>::infinity();
    in_range("lr", o.lr, 0, inf, false);
    in_range("min_lr", o.min_lr, 0, inf, false);
    in_range("wd", o.wd, 0, inf, false);
    in_range("b1", o.b1, 0, 1, false);
    in_range("b2", o.b2, 0, 1, false);
    in_range("eps", o.eps, 0, inf, true);
    in_range("clip", o.clip, 0, inf, false);
    s.batch = static_cast<int>(tr.integer("batch", 0, INT_MAX));
    s.seq = static_cast<int>(tr.integer("seq", 0, INT_MAX));

    bool consistent = *opt == OptimizerState::none || *opt == optimizer_state_of(o.optimizer);
    MT_CHECK(consistent, where, ": \"optimizer_state\" = \"", optimizer_state_name(*opt),
             "\" contradicts \"train.optimizer\" = \"",
             kOptimizers.at(static_cast<size_t>(o.optimizer)), "\"");
    return s;
}

std::string config_difference(const ModelConfig& stored, const ModelConfig& model) {
    return first_difference(json::parse(config_to_json(stored)), json::parse(config_to_json(model)),
                            "");
}

}  // namespace moetrain::io
