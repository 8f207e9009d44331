// The exact correspondence between a moetrain model (MODEL.md) and the transformers classes
// moetrain exports to and imports from: which family a config belongs to (or the one-line
// reason it belongs to none), the config.json of each side, and the tensor-by-tensor layout.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "moetrain/config.h"

namespace moetrain::io {

enum class HfFamily { gpt2, llama, mixtral, qwen2_moe };

const char* hf_architecture(HfFamily f);  // "GPT2LMHeadModel", ...
const char* hf_model_type(HfFamily f);    // "gpt2", ...

// The family whose transformers class computes exactly the function of `c`; throws a
// one-line error naming the first feature that no supported class computes.
HfFamily hf_family_for_export(const ModelConfig& c);

// Throws (one line naming the key) unless config.json of family `f` read back by
// hf_config_from_json gives `c` again, up to the folded NTK alpha and the z-loss weight.
void hf_check_round_trip(HfFamily f, const ModelConfig& c);

// config.json (and generation_config.json) for `c` exported as family `f`.
std::string hf_config_json(HfFamily f, const ModelConfig& c);
std::string hf_generation_config_json(const ModelConfig& c);

// Training-only settings of `c` that the transformers class does not reproduce (the model
// function is unaffected): one line each.
std::vector<std::string> hf_export_notes(HfFamily f, const ModelConfig& c);

struct HfImportedConfig {
    HfFamily family;
    ModelConfig config;
};
// Parse a transformers config.json (`where` names the file in messages); throws one line on an
// unknown architecture or a setting MODEL.md cannot represent.
HfImportedConfig hf_config_from_json(const std::string& text, const std::string& where);

// A contiguous block of one moetrain tensor (MODEL.md 6 name), `numel` elements from `offset`.
struct HfPart {
    std::string name;
    int64_t offset = 0;
    int64_t numel = 0;
};

// One transformers tensor. Its values are the parts concatenated in order (row blocks),
// transposed when `transpose` (GPT-2's Conv1D stores [in, out]), times `scale` (a power of
// two, so exact both ways). No parts: the tensor must be all zeros (a transformers parameter
// that the moetrain function does not have; `zero_reason` says which feature it would add).
struct HfTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<HfPart> parts;
    bool transpose = false;
    float scale = 1.0f;
    std::string zero_reason;
    int64_t numel() const;
};

std::vector<HfTensor> hf_tensor_map(HfFamily f, const ModelConfig& c);
// The same tensors one at a time, in the same order, without holding them all: a config.json
// can claim millions of expert tensors, and import checks each against the files as it comes.
void for_each_hf_tensor(HfFamily f, const ModelConfig& c,
                        const std::function<void(HfTensor)>& visit);

// Tensors that transformers may store but that hold no parameters (GPT-2's causal-mask
// buffers, rotary inv_freq); the importer skips them.
bool hf_ignored_tensor(const std::string& name);

}  // namespace moetrain::io
