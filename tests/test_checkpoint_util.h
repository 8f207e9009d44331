// Helpers shared by the checkpoint / safetensors / data tests: a self-removing temporary
// directory, whole-file read/write, and capturing the message of a moetrain::Error.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "io/checkpoint_integrity.h"
#include "io/crc32c.h"
#include "moetrain/error.h"
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

}  // namespace moetrain::testing
