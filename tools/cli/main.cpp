// moetrain: train, evaluate, sample from and benchmark MoE transformers on cpu/opencl/cuda.
// Every failure ends in one line "moetrain: error: ..." and a non-zero exit.
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "commands.h"
#include "moetrain/error.h"

namespace {
// Error messages quote user input (file contents, option values); keep them on one line.
std::string one_line(const char* what) {
    std::string out;
    for (const char* p = what; *p; ++p) {
        unsigned char c = static_cast<unsigned char>(*p);
        if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c < 0x20 || c == 0x7f)
            out += '?';
        else
            out += *p;
    }
    return out;
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "moetrain: train and run Mixture-of-Experts transformer language models on CPU, "
        "OpenCL or CUDA"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "moetrain 0.1.0");
    int exit_code = 0;
    moetrain::cli::add_info_command(app, exit_code);
    moetrain::cli::add_train_command(app, exit_code);
    moetrain::cli::add_eval_command(app, exit_code);
    moetrain::cli::add_generate_command(app, exit_code);
    moetrain::cli::add_bench_command(app, exit_code);
    moetrain::cli::add_gradcheck_command(app, exit_code);
    moetrain::cli::add_config_command(app, exit_code);
    moetrain::cli::add_plan_command(app, exit_code);
    moetrain::cli::add_tokenizer_command(app, exit_code);
    moetrain::cli::add_tokenize_command(app, exit_code);
    moetrain::cli::add_export_command(app, exit_code);
    moetrain::cli::add_import_command(app, exit_code);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version (subcommand aware)
        // One line, e.g. "moetrain: error: --steps: Value -3 not in range [0 - ...]".
        std::fprintf(stderr, "moetrain: error: %s (see --help)\n", one_line(e.what()).c_str());
        return 2;
    } catch (const moetrain::Error& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "moetrain: error: %s\n", one_line(e.what()).c_str());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fflush(stdout);
        std::fprintf(stderr, "moetrain: error: out of memory\n");
        return 1;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "moetrain: error: %s\n", one_line(e.what()).c_str());
        return 1;
    }
    return exit_code;
}
