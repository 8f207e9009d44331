// The JSON side of checkpoints: state.json (TrainState + optimizer-state kind) and the
// comparison of a stored config with a model's, naming the first differing key.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "moetrain/checkpoint.h"

namespace moetrain::io {

// The files of a checkpoint directory.
inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kStateFile = "state.json";

// adamw_moments, adamw8bit_moments, sgd_no_moments, weights_only
std::string optimizer_state_name(OptimizerState s);
// What a trainer with optimizer k saves.
OptimizerState optimizer_state_of(OptimizerKind k);

// The optimizer and lr schedule settings of `o` as state.json's "train" object holds them
// (min_lr resolved: lr / 10 when < 0); the multi-rank launch also compares them between ranks.
nlohmann::ordered_json train_options_json(const TrainOptions& o);

std::string state_to_json(const TrainState& s, OptimizerState opt);
// Parse state.json text; errors read "<where>: ...".
TrainState parse_state(const std::string& text, const std::string& where, OptimizerState* opt);

// "" when both canonical JSON forms agree, else e.g. "\"d_model\" = 128 in the checkpoint,
// 64 in the model".
std::string config_difference(const ModelConfig& stored, const ModelConfig& model);

}  // namespace moetrain::io
