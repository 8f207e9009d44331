// `--data` with shards: a shard file, a directory of *.bin shards, or a glob; the train and
// validation sets are told apart by name as llm.c does ("_val_" marks validation).
#include <glob.h>

#include <algorithm>
#include <filesystem>

#include "moetrain/error.h"
#include "moetrain/shards.h"

namespace moetrain {
namespace {

bool has_glob_chars(const std::string& s) {
    return s.find_first_of("*?[") != std::string::npos;
}

}  // namespace

std::vector<std::string> expand_file_spec(const std::string& spec, const std::string& extension) {
    namespace fs = std::filesystem;
    std::vector<std::string> files;
    std::error_code ec;
    if (fs::is_directory(spec, ec)) {
        for (const auto& e : fs::directory_iterator(spec, ec)) {
            if (!extension.empty() && e.path().extension() != extension) continue;
            // Sub-directories are not data; a FIFO, device or socket would be a silent hole
            // in the corpus (or, read, a hang): refused by name.
            const fs::file_type type = e.status(ec).type();
            MT_CHECK(type == fs::file_type::regular || type == fs::file_type::directory ||
                         type == fs::file_type::not_found,
                     "--data ", spec, ": ", e.path().string(), " is not a regular file");
            if (type == fs::file_type::regular) files.push_back(e.path().string());
        }
        MT_CHECK(!files.empty(), "--data ", spec, ": the directory holds no ",
                 extension.empty() ? "files" : "*" + extension + " files");
    } else if (has_glob_chars(spec) && !fs::exists(spec, ec)) {
        glob_t g{};
        int rc = ::glob(spec.c_str(), 0, nullptr, &g);
        for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
        ::globfree(&g);
        MT_CHECK(!files.empty(), "--data ", spec, ": the pattern matches no files");
    } else {
        files.push_back(spec);
    }
    std::sort(files.begin(), files.end());
    return files;
}

ShardFiles find_shards(const std::string& spec) {
    ShardFiles out;
    for (const std::string& f : expand_file_spec(spec, ".bin")) {
        MT_CHECK(is_shard_file(f), "--data ", spec, ": ", f,
                 " is not a token shard (no llm.c shard magic)");
        std::string name = std::filesystem::path(f).filename().string();
        (name.find("_val_") != std::string::npos ? out.val : out.train).push_back(f);
    }
    MT_CHECK(!out.train.empty(), "--data ", spec, ": only validation shards (\"_val_\"), no ",
             "train shards");
    return out;
}

}  // namespace moetrain
