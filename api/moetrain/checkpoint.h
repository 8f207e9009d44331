// Checkpoints (MODEL.md section 6; format described in docs/CHECKPOINTS.md): a directory
//   model.safetensors      fp32 parameters, metadata "config" (JSON) and "format" "moetrain-1"
//   optimizer.safetensors  AdamW moments m.<name>, v.<name>, or the 8-bit AdamW codes and
//                          block absmax per parameter range (absent for SGD / weights only)
//   state.json             step, data positions, RNG, training hyper-parameters
// written atomically: a crash at any moment leaves every earlier checkpoint intact, and a
// half-written one (a `<dir>.tmp-<pid>` sibling) is never picked up by resolve_checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moetrain/config.h"
#include "moetrain/tokenizer.h"
#include "moetrain/train.h"

namespace moetrain {

inline constexpr const char* kCheckpointFormat = "moetrain-1";

// Everything state.json holds besides the optimizer moments.
struct TrainState {
    int64_t step = 0;                 // optimizer steps completed
    int64_t train_pos = 0;            // BatchLoader position of the train split
    int64_t eval_pos = 0;             // BatchLoader position of the validation split
    uint64_t seed = 0;                // run seed (weight init, sampling)
    uint64_t rng_counter = 0;         // counter-based RNG position (Philox counter) of the run
    TrainOptions options;             // optimizer, lr schedule, wd, betas, eps, clip, accum
    int batch = 0;                    // B
    int seq = 0;                      // T
    std::string precision = "fp32";   // fp32 | bf16 | fp16 (Model::set_precision)
    double loss_scale = 1.0;          // fp16 dynamic loss scale; 1 for fp32 / bf16
    int64_t loss_scale_clean = 0;     // clean fp16 steps since the scale last changed
    int64_t skipped_steps = 0;        // fp16 steps skipped for overflowing gradients
    std::string tokenizer = "bytes";  // the spec training was given (informational for files)
    std::string tokenizer_pattern;    // --tokenizer-pattern of a tiktoken file
    std::string tokenizer_sha256;     // SHA-256 of the tokenizer file ("" for bytes)
    // The tokenizer file's bytes, saved next to state.json as tokenizer_copy_name(tokenizer);
    // not part of state.json, and empty when read back (load_checkpoint_tokenizer reads it).
    std::string tokenizer_file;
    int64_t shuffle_seed = -1;  // --shuffle SEED of the train loader (-1: consecutive windows)
    int64_t val_tokens = -1;    // --val-tokens of shards without "_val_" files (-1: not given)
    std::string data_path;      // informational
    int64_t data_tokens = 0;    // tokens in the whole data file (resume checks the same data)
};

// What the checkpoint holds for the optimizer (state.json "optimizer_state").
enum class OptimizerState {
    none,       // weights only (saved without a Trainer)
    sgd,        // SGD: nothing beyond the step count; no optimizer.safetensors
    adamw,      // optimizer.safetensors with m.<name>, v.<name>
    adamw8bit,  // optimizer.safetensors with {m,v}_codes.<range>, {m,v}_absmax.<range>
};

struct CheckpointInfo {
    std::string dir;
    ModelConfig config;  // from model.safetensors metadata
    TrainState state;
    OptimizerState optimizer = OptimizerState::none;
    // Every file and tensor carries a CRC32C that was verified (false: a checkpoint written
    // before checksums existed; it loads, and the CLI warns that it cannot be verified).
    bool checksummed = false;
    bool has_optimizer() const { return optimizer != OptimizerState::none; }
};

// "step_000042" (at least 6 digits).
std::string step_dir_name(int64_t step);

// Write a checkpoint directory atomically (replacing an existing one of the same name).
// With a trainer, its moments, steps_done() and options() are saved (state.step and
// state.options are ignored); with trainer == nullptr only the weights and `state` are.
// Stale temporary directories of dead processes next to `dir` are removed.
void save_checkpoint(const std::string& dir, const Model& model, const Trainer* trainer,
                     const TrainState& state);

// The step_NNNNNN entries directly inside a run directory (6 to 19 digits: every int64 step
// step_dir_name writes), by ascending step; `complete_only` keeps those holding
// model.safetensors and state.json. Names whose number exceeds int64 are not steps.
struct StepDir {
    int64_t step;
    std::string path;
};
std::vector<StepDir> list_step_dirs(const std::string& run_dir, bool complete_only);

// `path` is a checkpoint directory (returned as is) or a run directory (the newest
// step_NNNNNN sub-directory holding model.safetensors and state.json is returned).
// Throws a one-line error when neither.
std::string resolve_checkpoint(const std::string& path);

// The tokenizer a checkpoint was trained with: "bytes", or its copy of the tokenizer file,
// checked against the SHA-256 in state.json.
std::shared_ptr<const Tokenizer> load_checkpoint_tokenizer(const CheckpointInfo& info);

// Verifies the checksums of every file (throws naming the file and the tensor on damage),
// then reads state.json and the model.safetensors header (fully validated).
CheckpointInfo read_checkpoint_info(const std::string& dir);

// Load the weights into `model`. Checks the format, that the stored config equals the
// model's (first differing key named), and every tensor's presence, dtype and shape (no
// missing, no extra); throws one line on the first problem, leaving the model untouched.
void load_weights(const std::string& dir, Model& model);

// Restore the optimizer: moments (AdamW; codes and block absmax for 8-bit AdamW, exactly as
// saved) and steps_done(). The trainer's optimizer must match the checkpoint's; a
// weights-only checkpoint cannot be resumed.
void load_optimizer(const std::string& dir, Trainer& trainer);

}  // namespace moetrain
