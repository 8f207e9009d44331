// Helpers shared by the CLI subcommands: model selection, device opening, formatting, RSS.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "moetrain/backend.h"
#include "moetrain/config.h"
#include "moetrain/data.h"
#include "stop_signals.h"

namespace moetrain::cli {

// --preset NAME | --config FILE.json (exactly one, unless `optional`).
struct ModelChoice {
    std::string preset;
    std::string config_path;
    void add_options(CLI::App* cmd);
    bool given() const { return !preset.empty() || !config_path.empty(); }
    ModelConfig resolve() const;  // throws when neither or both were given
};

// --device, --threads and --cuda-graphs.
struct DeviceChoice {
    std::string device = "cpu";
    int threads = 0;
    std::string cuda_graphs = "on";
    void add_options(CLI::App* cmd, bool with_threads = true);
    std::unique_ptr<Device> open() const;
};

// --data: a text file tokenised with the tokenizer and split 90/10, or token shards (a shard
// file, a directory or a glob; docs/DATA.md) whose validation set is the "_val_" shards or
// else the last `val_tokens` tokens (< 0: the last 10%, as for text). The tokenizer must fit
// the model's vocabulary; shard ids are checked against it as they are read.
struct TokenData {
    TokenStream train, val;
};
TokenData load_token_data(const std::string& path, const Tokenizer& tokenizer,
                          const std::string& tokenizer_spec, const ModelConfig& cfg,
                          int64_t val_tokens = -1);

// A text option whose --help shows its default value, checked by `check`. Numeric options are
// declared with add_int_option / add_real_option (number_options.h) only.
template <class T>
CLI::Option* add_defaulted(CLI::App* cmd, const std::string& name, T& value,
                           const std::string& help, const CLI::Validator& check) {
    static_assert(!std::is_arithmetic_v<T>, "numeric options: add_int_option / add_real_option");
    return cmd->add_option(name, value, help)->capture_default_str()->check(check);
}

// A subcommand of `app` and the arguments object its options fill; the object is shared so that
// the subcommand's callback can keep it alive.
template <class Args>
std::pair<std::shared_ptr<Args>, CLI::App*> add_command(CLI::App& app, const std::string& name,
                                                        const std::string& help) {
    return {std::make_shared<Args>(), app.add_subcommand(name, help)};
}

// The subcommand's action: `run` on the parsed options, then exit status 0 (errors throw), or
// 128 + signal when a stop request arrived as it finished (stop_signals.h).
template <class F>
void on_run(CLI::App* cmd, int& exit_code, F run) {
    cmd->callback([run = std::move(run), &exit_code, cmd] {
        run();
        exit_code = exit_status_after(cmd->get_name().c_str());
    });
}

// --precision fp32|bf16|fp16 (Model::set_precision), default fp32.
void add_precision_option(CLI::App* cmd, std::string& precision);
// --attention16 (Model::set_attention16): attention in the 16-bit type of --precision bf16|fp16
// (the cuda backend's tensor-core kernels), default off (fp32 attention).
void add_attention16_option(CLI::App* cmd, bool& attention16);

// --checkpoint DIR (required): a checkpoint directory, or a run directory (its newest step).
void add_checkpoint_option(CLI::App* cmd, std::string& path);

double peak_rss_mb();                         // ru_maxrss of this process, MiB
std::string format_duration(double seconds);  // "1:02:03" / "02:03"
bool stdout_is_terminal();

}  // namespace moetrain::cli
