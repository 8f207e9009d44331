// `moetrain tokenizer info|encode|decode`: inspect a tokenizer and run it on a file, so that
// its output can be compared with other tools (ids as a JSON array, decoded bytes verbatim).

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cmd_tokenizer_bench.h"
#include "commands.h"
#include "io/file.h"
#include "stop_signals.h"
#include "moetrain/error.h"
#include "moetrain/shards.h"
#include "number_options.h"
#include "run_guards.h"
#include "tokenizer_choice.h"

namespace moetrain::cli {
namespace {

std::string read_input(const std::string& path) {
    return io::read_file(path, io::kCommandInputFile);
}

void add_info(CLI::App* parent) {
    auto t = std::make_shared<TokenizerChoice>();
    auto* cmd = parent->add_subcommand("info", "print a tokenizer's kind, vocabulary size and eot");
    t->add_options(cmd);
    cmd->callback([t] {
        auto tok = t->load();
        nlohmann::ordered_json j = {{"kind", tok->kind()}, {"vocab_size", tok->vocab_size()}};
        auto eot = tok->eot_id();
        j["eot"] = eot ? nlohmann::ordered_json(*eot) : nlohmann::ordered_json(nullptr);
        std::printf("%s\n", j.dump().c_str());
    });
}

// `tokenizer NAME FILE` with the tokenizer options: run(tokenizer, FILE's bytes) on the file.
void add_file_command(CLI::App* parent, const char* name, const char* help, const char* file_help,
                      std::function<void(const Tokenizer&, const std::string&)> run) {
    auto t = std::make_shared<TokenizerChoice>();
    auto file = std::make_shared<std::string>();
    auto* cmd = parent->add_subcommand(name, help);
    t->add_options(cmd);
    cmd->add_option("file", *file, file_help)->required();
    cmd->callback([t, file, run = std::move(run)] { run(*t->load(), *file); });
}

void add_encode(CLI::App* parent) {
    add_file_command(parent, "encode", "print the ids of a file's bytes as a JSON array",
                     "text file", [](const Tokenizer& tok, const std::string& file) {
                         std::vector<int32_t> ids = tok.encode(read_input(file));
                         std::printf("%s\n", nlohmann::json(ids).dump().c_str());
                     });
}

void add_decode(CLI::App* parent) {
    add_file_command(
        parent, "decode", "write the bytes of a JSON array of ids",
        "JSON file with an array of ids", [](const Tokenizer& tok, const std::string& file) {
            nlohmann::json j = nlohmann::json::parse(read_input(file), nullptr, false);
            MT_CHECK(j.is_array(), file, ": not a JSON array of ids");
            std::vector<int32_t> ids;
            for (const auto& v : j) {
                // Non-negative JSON integers are unsigned: 2^64 - 1 must not
                // read back as the int64 -1.
                const bool id = v.is_number_unsigned()
                                    ? v.get<uint64_t>() <= INT32_MAX
                                    : v.is_number_integer() && v.get<int64_t>() >= INT32_MIN;
                MT_CHECK(id, file, ": not a JSON array of ids");
                ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
            }
            std::string text = tok.decode(ids);
            std::fwrite(text.data(), 1, text.size(), stdout);
        });
}

void add_train(CLI::App* parent) {
    struct Args {
        std::vector<std::string> data, specials;
        int64_t vocab_size = 0;
        std::string out;
        int threads = 0;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = parent->add_subcommand(
        "train", "train a byte-level BPE (GPT-2 split) and write a Hugging Face tokenizer.json");
    cmd->add_option("--data", a->data, "text files, directories or globs")->required();
    add_int_option(cmd, "--vocab-size", a->vocab_size, "vocabulary size (specials + 256 + merges)",
                   int64_t{1}, int64_t{1} << 24)
        ->required();
    cmd->add_option("--out", a->out, "tokenizer.json to write")->required();
    cmd->add_option("--special", a->specials, "special tokens (ids 0..), e.g. <|endoftext|>");
    add_int_option(cmd, "--threads", a->threads, "files counted at once (0 = all cores)", 0)
        ->check(thread_count_check());
    cmd->callback([a] {
        stop_cooperatively();  // the trainer stops between pieces or merges, before --out
        std::vector<NamedPath> inputs;
        for (const std::string& d : a->data) inputs.push_back({"--data", d});
        const std::string out = guard_output({"--out", a->out}, inputs, OutputKind::file);
        std::vector<std::string> files;
        for (const std::string& d : a->data)
            for (std::string& f : expand_file_spec(d, "")) files.push_back(std::move(f));
        BpeTrainOptions o;
        o.vocab_size = a->vocab_size;
        o.specials = a->specials;
        o.threads = a->threads > 0
                        ? a->threads
                        : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
        o.progress = [](const std::string& line) {
            std::printf("tokenizer train: %s\n", line.c_str());
            std::fflush(stdout);
        };
        std::string json = train_byte_level_bpe(files, o);
        // Written under a temporary name and renamed: never a partial file under --out, whose
        // directory is made when missing (as `tokenize --out` is).
        const std::filesystem::path parent = std::filesystem::path(out).parent_path();
        std::error_code ec;
        std::filesystem::create_directories(parent, ec);
        io::write_file_atomic(out, json, "--out");
        std::printf("tokenizer train: wrote %s (%lld tokens)\n", a->out.c_str(),
                    static_cast<long long>(load_tokenizer(out)->vocab_size()));
    });
}

}  // namespace

void add_tokenizer_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("tokenizer", "inspect, run and train tokenizers");
    cmd->require_subcommand(1);
    add_info(cmd);
    add_encode(cmd);
    add_decode(cmd);
    add_train(cmd);
    add_tokenizer_bench(cmd);
    cmd->final_callback([&exit_code] { exit_code = exit_status_after("tokenizer"); });
}

}  // namespace moetrain::cli
