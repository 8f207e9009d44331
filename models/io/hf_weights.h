// The safetensors weights of a transformers model directory: model.safetensors, or the shards
// named by model.safetensors.index.json. Tensors are found by name across the shards and
// read widened to fp32 (F32, BF16, F16; any other dtype is refused naming the tensor).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "moetrain/safetensors.h"

namespace moetrain::io {

class HfWeights {
  public:
    explicit HfWeights(const std::string& dir);

    const SafetensorsEntry* find(const std::string& name) const;  // null if absent
    std::vector<float> read_f32(const std::string& name) const;   // widened; throws if absent
    // Throws naming the tensor unless its dtype is one read_f32 widens (F32, BF16, F16).
    void check_dtype(const std::string& name) const;
    std::vector<std::string> names() const;                           // every tensor, sorted
    const std::vector<std::string>& files() const { return files_; }  // file names read
    std::string where(const std::string& name) const;                 // path holding `name`

  private:
    std::vector<std::string> files_;
    std::vector<std::unique_ptr<SafetensorsFile>> open_;
    std::map<std::string, std::pair<const SafetensorsFile*, const SafetensorsEntry*>> index_;
};

}  // namespace moetrain::io
