// Finds the `__global__` kernels declared in kernels_cuda/*.cuh (by scanning the source text)
// and which of them a set of launched kernel names does not cover.
#pragma once

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace simt_test {

// "file.cuh: name" for every __global__ function template or function in dir/*.cuh.
inline std::vector<std::pair<std::string, std::string>> scan_kernels(const std::string& dir) {
    std::vector<std::pair<std::string, std::string>> out;
    std::regex re(R"(__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?void\s+(\w+)\s*\()");
    std::vector<std::filesystem::path> files;
    for (auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".cuh") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
        std::ifstream in(f);
        std::stringstream ss;
        ss << in.rdbuf();
        std::string text = ss.str();
        for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it)
            out.emplace_back(f.filename().string(), (*it)[1].str());
    }
    return out;
}

inline std::vector<std::string> untested_kernels(const std::string& dir,
                                                 const std::set<std::string>& launched) {
    std::vector<std::string> missing;
    for (auto& [file, name] : scan_kernels(dir))
        if (!launched.count(name)) missing.push_back(file + ": " + name);
    return missing;
}

}  // namespace simt_test
