// `moetrain verify CKPT`: check a checkpoint without building a model: every file's and
// every tensor's CRC32C, the safetensors structure of each file, state.json, that the stored
// config is valid, and the tokenizer copy against state.json's SHA-256 (the check loading
// does). The last stdout line is JSON {"checkpoint","checksummed","step","tensors","bytes",
// "tokenizer"}; damage ends in one error line naming the file (and the tensor).
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "moetrain/checkpoint.h"
#include "moetrain/error.h"
#include "moetrain/safetensors.h"

namespace moetrain::cli {
namespace {

void run_verify(const std::string& path) {
    const std::string dir = resolve_checkpoint(path);
    const CheckpointInfo info = read_checkpoint_info(dir);  // checksums, state, model header
    size_t tensors = 0;
    uint64_t bytes = 0;
    std::vector<char> buf;
    for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
        const std::string file = dir + "/" + name;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(file, ec)) continue;
        SafetensorsFile f(file);
        MT_CHECK(!info.checksummed || f.has_checksums(), "checkpoint file ", file,
                 ": no per-tensor checksums although state.json has them (corrupt file)");
        for (const SafetensorsEntry& e : f.tensors()) {  // each tensor's own checksum
            buf.resize(e.end - e.begin);
            f.read(e, buf.data());
            bytes += e.end - e.begin;
            ++tensors;
        }
    }
    // The tokenizer copy is not among the CRC32C checksums: its SHA-256 in state.json is
    // checked by the same code that loading uses (and the copy parsed).
    const std::string tokenizer_copy = tokenizer_copy_name(info.state.tokenizer);
    load_checkpoint_tokenizer(info);
    if (!info.checksummed)
        std::fprintf(stderr,
                     "moetrain: warning: %s has no checksums (written before moetrain "
                     "checksummed its checkpoints): structure checked, contents not verifiable\n",
                     dir.c_str());
    std::printf("verify: %s: %s, step %lld, %zu tensors, %llu data bytes\n", dir.c_str(),
                info.checksummed ? "all checksums match" : "no checksums",
                static_cast<long long>(info.state.step), tensors,
                static_cast<unsigned long long>(bytes));
    nlohmann::json j{{"checkpoint", dir},
                     {"checksummed", info.checksummed},
                     {"step", info.state.step},
                     {"tensors", tensors},
                     {"bytes", bytes},
                     {"tokenizer", tokenizer_copy.empty() ? nlohmann::json(nullptr)
                                                          : nlohmann::json(tokenizer_copy)}};
    std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_verify_command(CLI::App& app, int& exit_code) {
    auto path = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand(
        "verify", "check a checkpoint's checksums and structure without loading a model");
    cmd->add_option("checkpoint", *path, "checkpoint dir or run dir (newest step)")->required();
    on_run(cmd, exit_code, [path] { run_verify(*path); });
}

}  // namespace moetrain::cli
