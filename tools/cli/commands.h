// The subcommands of the moetrain CLI; each file registers one with CLI11.
#pragma once

#include <CLI/CLI.hpp>

namespace moetrain::cli {

// Each adds its subcommand to `app`; the callback sets `exit_code` (errors are thrown as
// moetrain::Error and turned into one line + exit 1 by main).
void add_info_command(CLI::App& app, int& exit_code);
void add_train_command(CLI::App& app, int& exit_code);
void add_eval_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_gradcheck_command(CLI::App& app, int& exit_code);
void add_config_command(CLI::App& app, int& exit_code);
void add_plan_command(CLI::App& app, int& exit_code);
void add_report_command(CLI::App& app, int& exit_code);
void add_tokenizer_command(CLI::App& app, int& exit_code);
void add_tokenize_command(CLI::App& app, int& exit_code);
void add_verify_command(CLI::App& app, int& exit_code);
void add_export_command(CLI::App& app, int& exit_code);
void add_import_command(CLI::App& app, int& exit_code);

}  // namespace moetrain::cli
