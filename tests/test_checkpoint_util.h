// Helpers shared by the checkpoint / safetensors / data tests: a self-removing temporary
// directory, whole-file read/write, and capturing the message of a moetrain::Error.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <iterator>
#include <string>

#include "io/checkpoint_integrity.h"
#include "io/crc32c.h"
#include "moetrain/error.h"
#include "moetrain/safetensors.h"
#include "nlohmann/json.hpp"

namespace moetrain::testing {

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        static std::atomic<int> counter{0};
        path = std::filesystem::temp_directory_path() /
               ("moetrain_io_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return (path / name).string(); }
};

inline std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void spit(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The message of the moetrain::Error `f` throws, "" when it does not throw.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const moetrain::Error& e) {
        return e.what();
    }
    return "";
}

// After a test rewrote files of checkpoint `dir` on purpose (to reach the checks behind the
// checksums, as a buggy writer with consistent checksums would), record the new files'
// checksums in its state.json. Does nothing when state.json is missing or not JSON.
inline void reseal_checkpoint(const std::string& dir) {
    auto state = nlohmann::ordered_json::parse(slurp(dir + "/state.json"), nullptr, false);
    if (state.is_discarded() || !state.is_object()) return;
    state.erase("checksums");
    std::map<std::string, uint32_t> files;
    for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
        if (!std::filesystem::is_regular_file(dir + "/" + name)) continue;
        const std::string bytes = slurp(dir + "/" + name);
        files[name] = io::crc32c(bytes.data(), bytes.size());
    }
    spit(dir + "/state.json", io::add_state_checksums(state.dump(2), files));
}

// Rewrite `path` (a safetensors file) after `edit` changed its list of tensors (and
// `edit_meta`, when given, its metadata).
struct RawTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<char> bytes;
};
inline void rewrite(
    const std::string& path, const std::function<void(std::vector<RawTensor>&)>& edit,
    const std::function<void(std::map<std::string, std::string>&)>& edit_meta = nullptr) {
    std::vector<RawTensor> tensors;
    std::map<std::string, std::string> meta;
    {
        SafetensorsFile f(path);
        meta = f.metadata();
        for (const auto& e : f.tensors()) {
            RawTensor t{e.name, e.dtype, e.shape, std::vector<char>(e.end - e.begin)};
            f.read(e, t.bytes.data());
            tensors.push_back(std::move(t));
        }
    }
    edit(tensors);
    if (edit_meta) edit_meta(meta);
    SafetensorsWriter w;
    for (const auto& t : tensors) w.add(t.name, t.dtype, t.shape, t.bytes.data());
    for (const auto& [k, v] : meta)
        if (k != kSafetensorsChecksumKey) w.set_metadata(k, v);
    w.add_checksums();  // consistent checksums: the checks behind them are what is tested
    w.write(path);
}

}  // namespace moetrain::testing
