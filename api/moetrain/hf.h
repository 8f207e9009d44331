// Hugging Face interoperability (docs/INTEROP.md): export a moetrain checkpoint as a
// `transformers` model directory (GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM,
// Qwen2MoeForCausalLM) and import such a directory as a weights-only moetrain checkpoint.
// Both directions map exactly (the same function up to rounding) or refuse with one line
// naming the feature that has no exact counterpart; never an approximation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moetrain/config.h"

namespace moetrain {

struct HfExportOptions {
    // Above this many bytes of tensor data the weights are split into
    // model-0000i-of-0000N.safetensors shards with a model.safetensors.index.json.
    int64_t max_shard_bytes = 5'000'000'000;
};

struct HfResult {
    std::string architecture;        // "LlamaForCausalLM", ...
    ModelConfig config;              // the moetrain side of the mapping
    std::vector<std::string> files;  // files written (export) or read (import), names only
    // Training-only settings that do not carry over to the other side (one line each).
    std::vector<std::string> notes;
};

// Writes config.json, generation_config.json and the safetensors weights (fp32) of the
// checkpoint directory `checkpoint_dir` into `out_dir`, with the checkpoint's tokenizer copy as
// tokenizer.json (and a tokenizer_config.json) when it is a Hugging Face tokenizer.json (other
// tokenizers: a note), atomically (a temporary sibling
// renamed into place), with a manifest (.moetrain-output.json) of the files it wrote.
// `out_dir` is resolved first (`..` against the real parent, links followed); it must be
// missing, empty, or an earlier export whose manifest lists each of its files unchanged (it
// is then replaced): a directory with anything else is refused, never cleaned. Throws a one-line
// moetrain::Error when the config has no exact transformers counterpart.
HfResult export_hf(const std::string& checkpoint_dir, const std::string& out_dir,
                   const HfExportOptions& options = {});

// Reads config.json and model.safetensors (or the shards listed by
// model.safetensors.index.json; F32, BF16 and F16 widened to fp32) from `hf_dir` and writes a
// weights-only moetrain checkpoint to `checkpoint_dir` (atomically), with `hf_dir`/tokenizer.json,
// when present, as the checkpoint's tokenizer (it must load and fit vocab_size). Throws a one-line
// moetrain::Error on an unknown architecture, a missing or unexpected tensor, a shape that
// does not match the config, and anything else MODEL.md cannot represent.
struct HfImportOptions {
    bool tokenizer = true;  // false: leave hf_dir/tokenizer.json out (the checkpoint gets bytes)
};
HfResult import_hf(const std::string& hf_dir, const std::string& checkpoint_dir,
                   const HfImportOptions& options = {});

}  // namespace moetrain
