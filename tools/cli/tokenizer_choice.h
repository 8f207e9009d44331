// --tokenizer SPEC and --tokenizer-pattern NAME, shared by every command that reads or writes
// text (moetrain/tokenizer.h lists the specs).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "moetrain/checkpoint.h"
#include "moetrain/tokenizer.h"

namespace moetrain::cli {

struct TokenizerChoice {
    std::string spec = "bytes";
    std::string pattern;
    void add_options(CLI::App* cmd);
    std::shared_ptr<const Tokenizer> load() const;
    // The tokenizer file this choice reads ("" for bytes): an input no output may overwrite.
    std::string file() const { return spec == "bytes" ? "" : spec; }
};

// The tokenizer of a training run and what its checkpoints record about it. On --resume it is
// the checkpoint's copy; a --tokenizer given again must be the same file (same SHA-256).
struct RunTokenizer {
    std::shared_ptr<const Tokenizer> tokenizer;
    std::string spec, pattern, sha256, file;  // file: the tokenizer file's bytes ("" = bytes)
    void record(TrainState& state) const;
};
RunTokenizer run_tokenizer(const TokenizerChoice& choice, bool given, const CheckpointInfo* resume);

// --tokenizer when given, else the checkpoint's tokenizer (eval, generate).
std::shared_ptr<const Tokenizer> checkpoint_or_given_tokenizer(const TokenizerChoice& choice,
                                                               bool given,
                                                               const CheckpointInfo& info);

}  // namespace moetrain::cli
