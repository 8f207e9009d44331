// HfWeights: one safetensors file or an index of shards, every tensor checked to live in
// exactly one file and (with an index) in the file the index names.
#include "io/hf_weights.h"

#include <cstring>
#include <filesystem>
#include <set>

#include "io/file.h"
#include "io/json.h"
#include "moetrain/dtype.h"
#include "moetrain/error.h"

namespace fs = std::filesystem;

namespace moetrain::io {

HfWeights::HfWeights(const std::string& dir) {
    const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
    const std::string single = (fs::path(dir) / "model.safetensors").string();
    std::error_code ec;
    std::map<std::string, std::string> weight_map;
    // exists(), not is_regular_file(): an index that is a FIFO or a device is refused by the
    // reader, never skipped.
    if (fs::exists(index_path, ec)) {
        const json j = parse_json_strict(read_file(index_path, kIndexFile), index_path);
        MT_CHECK(j.is_object() && j.contains("weight_map") && j.at("weight_map").is_object(),
                 index_path, ": no \"weight_map\" object");
        std::set<std::string> shards;
        for (const auto& [name, file] : j.at("weight_map").items()) {
            MT_CHECK(file.is_string(), index_path, ": weight_map[\"", name, "\"] is not a string");
            const std::string f = file.get<std::string>();
            MT_CHECK(!f.empty() && f.find('/') == std::string::npos && f != "..", index_path,
                     ": weight_map[\"", name, "\"] names \"", f, "\", not a file in ", dir);
            weight_map[name] = f;
            shards.insert(f);
        }
        files_.assign(shards.begin(), shards.end());
    } else {
        MT_CHECK(fs::exists(single, ec), "import: ", dir,
                 " has neither model.safetensors nor model.safetensors.index.json (only "
                 "safetensors weights are read)");
        files_.push_back("model.safetensors");
    }
    for (const std::string& name : files_) {
        open_.push_back(std::make_unique<SafetensorsFile>((fs::path(dir) / name).string()));
        const SafetensorsFile* f = open_.back().get();
        for (const SafetensorsEntry& e : f->tensors()) {
            MT_CHECK(index_.find(e.name) == index_.end(), f->path(), ": tensor \"", e.name,
                     "\" is also in ", where(e.name));
            if (!weight_map.empty()) {
                auto it = weight_map.find(e.name);
                MT_CHECK(it != weight_map.end() && it->second == name, f->path(), ": tensor \"",
                         e.name, "\" is not listed for this file in model.safetensors.index.json");
            }
            index_[e.name] = {f, &e};
        }
    }
    for (const auto& [name, file] : weight_map)
        MT_CHECK(index_.count(name), index_path, ": tensor \"", name, "\" is not in ", file);
}

const SafetensorsEntry* HfWeights::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second.second;
}

std::string HfWeights::where(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? std::string("(none)") : it->second.first->path();
}

std::vector<std::string> HfWeights::names() const {
    std::vector<std::string> out;
    out.reserve(index_.size());
    for (const auto& kv : index_) out.push_back(kv.first);
    return out;
}

void HfWeights::check_dtype(const std::string& name) const {
    auto it = index_.find(name);
    MT_CHECK(it != index_.end(), "import: tensor \"", name, "\" not found");
    const auto [file, e] = it->second;
    MT_CHECK(e->dtype == DType::f32 || e->dtype == DType::bf16 || e->dtype == DType::f16,
             file->path(), ": tensor \"", name, "\" has dtype ", safetensors_dtype_name(e->dtype),
             " (F32, BF16 or F16 expected)");
}

std::vector<float> HfWeights::read_f32(const std::string& name) const {
    check_dtype(name);
    const auto [file, e] = index_.at(name);
    const size_t n = static_cast<size_t>(e->numel());
    std::vector<float> out(n);
    if (e->dtype == DType::f32) {
        file->read(*e, out.data());
        return out;
    }
    std::vector<uint16_t> half(n);
    file->read(*e, half.data());
    for (size_t i = 0; i < n; ++i)
        out[i] = e->dtype == DType::bf16 ? bf16_to_f32(half[i]) : f16_to_f32(half[i]);
    return out;
}

}  // namespace moetrain::io
