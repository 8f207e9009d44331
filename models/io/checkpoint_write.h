// Writing a whole checkpoint directory from host buffers (no live Model needed): the
// atomic directory, model.safetensors, optimizer.safetensors (AdamW, 8-bit AdamW) and
// state.json.
// save_checkpoint() downloads the buffers and calls this; tests call it with plain tensors.
#pragma once

#include <string>
#include <vector>

#include "io/checkpoint_tensors.h"
#include "moetrain/checkpoint.h"

namespace moetrain::io {

struct CheckpointBuffers {
    const std::vector<ParamInfo>* params = nullptr;  // names, shapes, offsets into the buffers
    const std::vector<float>* weights = nullptr;
    // Non-trained model tensors saved with the weights (Model::buffers: the expert biases),
    // offsets into buffer_values; both may be null (none).
    const std::vector<ParamInfo>* buffers = nullptr;
    const std::vector<float>* buffer_values = nullptr;
    const std::vector<float>* m = nullptr;  // AdamW moments; required when opt == adamw
    const std::vector<float>* v = nullptr;
    const std::vector<QuantizedHost>* quantized = nullptr;  // required when opt == adamw8bit
    std::string config_json;  // stored in model.safetensors metadata "config"
};

void write_checkpoint_dir(const std::string& dir, const CheckpointBuffers& buffers,
                          const TrainState& state, OptimizerState opt);

}  // namespace moetrain::io
