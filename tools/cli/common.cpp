// Helpers shared by the CLI subcommands.
#include "common.h"
#include "number_options.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "moetrain/error.h"
#include "moetrain/shards.h"

namespace moetrain::cli {

void ModelChoice::add_options(CLI::App* cmd) {
    auto* p = cmd->add_option("--preset", preset,
                              "built-in model: tiny, dense-small, moe-mini, "
                              "gpt2-124m, seed-moe");
    auto* c = cmd->add_option("--config", config_path, "model config JSON (MODEL.md section 1)");
    p->excludes(c);
}

ModelConfig ModelChoice::resolve() const {
    MT_CHECK(given(), "give a model with --preset NAME or --config FILE.json");
    if (!preset.empty()) return preset_config(preset);
    return load_config_file(config_path);
}

void DeviceChoice::add_options(CLI::App* cmd, bool with_threads) {
    cmd->add_option("--device", device, "cpu | opencl[:N] | cuda[:N] (see `moetrain info`)")
        ->capture_default_str();
    if (with_threads)
        add_int_option(cmd, "--threads", threads, "CPU threads (0 = all cores)", 0)
            ->check(thread_count_check());
    cmd->add_option("--cuda-graphs", cuda_graphs,
                    "cuda: capture the training / evaluation / decode step into a CUDA Graph "
                    "after two warm-up steps and replay it (on | off)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
}

std::unique_ptr<Device> DeviceChoice::open() const {
    DeviceOptions o;
    o.threads = threads;
    o.cuda_graphs = cuda_graphs == "on";
    return open_device(device, o);
}

TokenData load_token_data(const std::string& path, const Tokenizer& tokenizer,
                          const std::string& tokenizer_spec, const ModelConfig& cfg,
                          int64_t val_tokens) {
    check_tokenizer(tokenizer, tokenizer_spec, cfg);
    std::error_code ec;
    const bool shards =
        std::filesystem::is_directory(path, ec) ||
        (!std::filesystem::exists(path, ec) && path.find_first_of("*?[") != std::string::npos) ||
        is_shard_file(path);
    if (!shards) {
        MT_CHECK(val_tokens < 0,
                 "--val-tokens applies to token shards; a text file is split 90/10");
        TokenSplit s = split_tokens(load_tokens(path, tokenizer));
        return TokenData{s.train, s.val};
    }
    ShardFiles files = find_shards(path);
    if (!files.val.empty()) {
        MT_CHECK(val_tokens < 0, "--val-tokens: --data ", path,
                 " has validation shards (\"_val_\")");
        return TokenData{open_shards(files.train, cfg.vocab_size),
                         open_shards(files.val, cfg.vocab_size)};
    }
    TokenStream all = open_shards(files.train, cfg.vocab_size);
    const int64_t n = all->size();
    MT_CHECK(n > 0, "--data ", path, ": the shards hold no tokens");
    const int64_t n_val = val_tokens >= 0 ? val_tokens : n - (n / 10 * 9 + n % 10 * 9 / 10);
    MT_CHECK(n_val < n, "--val-tokens ", n_val, " leaves no training tokens (the shards hold ", n,
             ")");
    return TokenData{open_shards(files.train, cfg.vocab_size, 0, n - n_val),
                     open_shards(files.train, cfg.vocab_size, n - n_val, n)};
}

void add_precision_option(CLI::App* cmd, std::string& precision) {
    cmd->add_option("--precision", precision,
                    "fp32 | bf16 | fp16: 16-bit matrix products with fp32 accumulation and fp32 "
                    "master weights (fp16 training with dynamic loss scaling)")
        ->capture_default_str()
        ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
}

void add_attention16_option(CLI::App* cmd, bool& attention16) {
    cmd->add_flag("--attention16", attention16,
                  "with --precision bf16|fp16: attention rounds q, k, v, the probabilities and the "
                  "gradients to that type too (fp32 accumulation; cuda: cuDNN's fused attention "
                  "or tensor-core kernels); default fp32 attention");
}

void add_checkpoint_option(CLI::App* cmd, std::string& path) {
    cmd->add_option("--checkpoint", path, "checkpoint dir or run dir (newest step)")->required();
}

double peak_rss_mb() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

std::string format_duration(double seconds) {
    if (!(seconds >= 0) || seconds > 1e8) return "--:--";
    const long s = std::lround(seconds);
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
    return buf;
}

bool stdout_is_terminal() {
    return isatty(STDOUT_FILENO) != 0;
}

}  // namespace moetrain::cli
