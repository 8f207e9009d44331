// What the commands that run a saved model (eval, generate) share: the options that choose the
// checkpoint, precision, device and tokenizer; the memory check of a forward-only run; and the
// checkpoint's model loaded on the device.
#pragma once

#include <memory>
#include <string>

#include "common.h"
#include "moetrain/model.h"
#include "tokenizer_choice.h"

namespace moetrain::cli {

struct SavedModelArgs {
    std::string precision = "fp32";
    bool attention16 = false;
    DeviceChoice dev;
    std::string checkpoint;
    TokenizerChoice tokenizer;
    bool tokenizer_given = false;  // --tokenizer was on the command line
};

// --precision, --attention16 and --checkpoint; the command adds the device and tokenizer options
// where its help lists them.
void add_saved_model_options(CLI::App* cmd, SavedModelArgs& a);

// Fails in one line unless a forward-only run of `c` on batch x seq tokens (the training plan
// less its gradients and optimizer state) plus extra_bytes fits on the device.
void check_forward_fits(const SavedModelArgs& a, const ModelConfig& c, int batch, int seq,
                        double extra_bytes, const std::string& what);

// A device of its own and the model of checkpoint `dir` on it at --precision.
struct LoadedModel {
    std::unique_ptr<Device> device;
    std::unique_ptr<Model> model;
};
LoadedModel load_saved_model(const SavedModelArgs& a, const std::string& dir, const ModelConfig& c);

}  // namespace moetrain::cli
