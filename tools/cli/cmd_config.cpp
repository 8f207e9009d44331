// `moetrain config`: print the canonical JSON of a preset or config file (every key explicit),
// a starting point for custom models and the input of bench/compare_pytorch.py.
#include <cstdio>

#include "commands.h"
#include "common.h"

namespace moetrain::cli {

void add_config_command(CLI::App& app, int& exit_code) {
    auto m = std::make_shared<ModelChoice>();
    auto* cmd = app.add_subcommand("config", "print a preset's (or config file's) full JSON");
    m->add_options(cmd);
    on_run(cmd, exit_code, [m] { std::printf("%s\n", config_to_json(m->resolve()).c_str()); });
}

}  // namespace moetrain::cli
