// Helpers shared by the checkpoint / safetensors / data tests: a self-removing temporary
// directory, whole-file read/write, and capturing the message of a moetrain::Error.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "moetrain/error.h"

namespace moetrain::testing {

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        static std::atomic<int> counter{0};
        path = std::filesystem::temp_directory_path() /
               ("moetrain_io_test_" + std::to_string(::getpid()) + "_" +
                std::to_string(counter++));
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

}  // namespace moetrain::testing
