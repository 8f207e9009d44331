// moetrain: train, evaluate, sample from and benchmark MoE transformers on cpu/opencl/cuda.
// Every failure ends in one line "moetrain: error: ..." and a non-zero exit.
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "commands.h"
#include "moetrain/error.h"
#include "moetrain/stop.h"
#include "stop_signals.h"

namespace {
// Length of the valid UTF-8 sequence starting at s[i] (0 when it is not one).
size_t utf8_length(const std::string& s, size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k)
        if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
    return n;
}

// Error messages quote user input (file contents, option values): keep them on one line,
// printable and short. Control characters and bytes that are not UTF-8 are shown as \xNN;
// a message over kMax bytes keeps its beginning and end around a note of what was left out.
std::string one_line(const char* what) {
    const std::string in(what);
    std::string out;
    for (size_t i = 0; i < in.size();) {
        const auto c = static_cast<unsigned char>(in[i]);
        const size_t n = c >= 0x80 ? utf8_length(in, i) : 1;
        if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c < 0x20 || c == 0x7f || n == 0) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02X", c);
            out += hex;
        } else {
            out.append(in, i, n);
        }
        i += n == 0 ? 1 : n;
    }
    constexpr size_t kMax = 1000, kHead = 700, kTail = 250;
    if (out.size() <= kMax) return out;
    // Cut at character boundaries (never inside a UTF-8 sequence).
    size_t head = kHead, tail = out.size() - kTail;
    while (head > 0 && (static_cast<unsigned char>(out[head]) & 0xC0) == 0x80) --head;
    while (tail < out.size() && (static_cast<unsigned char>(out[tail]) & 0xC0) == 0x80) ++tail;
    return out.substr(0, head) + " [... " + std::to_string(tail - head) + " bytes left out ...] " +
           out.substr(tail);
}
}  // namespace

static int run_cli(int argc, char** argv) {
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
    moetrain::cli::add_report_command(app, exit_code);
    moetrain::cli::add_tokenizer_command(app, exit_code);
    moetrain::cli::add_tokenize_command(app, exit_code);
    moetrain::cli::add_verify_command(app, exit_code);
    moetrain::cli::add_export_command(app, exit_code);
    moetrain::cli::add_import_command(app, exit_code);
    moetrain::cli::install_stop_handlers();  // at once until a command acts on stops itself
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version (subcommand aware)
        // One line, e.g. "moetrain: error: --steps: Value -3 not in range [0 - ...]".
        std::fprintf(stderr, "moetrain: error: %s (see --help)\n", one_line(e.what()).c_str());
        return 2;
    } catch (const moetrain::Stopped& e) {  // "during ...; what is left"
        std::fflush(stdout);
        std::fprintf(stderr, "moetrain: stopped by %s %s\n",
                     moetrain::cli::stop_signal_name(e.code()), one_line(e.what()).c_str());
        return 128 + e.code();
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

int main(int argc, char** argv) {
    try {
        return run_cli(argc, argv);
    } catch (...) {  // thrown while setting up the commands or while reporting an error
        std::fputs("moetrain: error: internal failure (out of memory?)\n", stderr);
        return 1;
    }
}
