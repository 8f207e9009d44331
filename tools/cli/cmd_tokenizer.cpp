// `moetrain tokenizer info|encode|decode`: inspect a tokenizer and run it on a file, so that
// its output can be compared with other tools (ids as a JSON array, decoded bytes verbatim).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "moetrain/error.h"
#include "tokenizer_choice.h"

namespace moetrain::cli {
namespace {

std::string read_input(const std::string& path) {
    return read_input_file(path, "input file");
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

void add_encode(CLI::App* parent) {
    auto t = std::make_shared<TokenizerChoice>();
    auto file = std::make_shared<std::string>();
    auto* cmd = parent->add_subcommand("encode", "print the ids of a file's bytes as a JSON array");
    t->add_options(cmd);
    cmd->add_option("file", *file, "text file")->required();
    cmd->callback([t, file] {
        auto tok = t->load();
        std::vector<int32_t> ids = tok->encode(read_input(*file));
        std::printf("%s\n", nlohmann::json(ids).dump().c_str());
    });
}

void add_decode(CLI::App* parent) {
    auto t = std::make_shared<TokenizerChoice>();
    auto file = std::make_shared<std::string>();
    auto* cmd = parent->add_subcommand("decode", "write the bytes of a JSON array of ids");
    t->add_options(cmd);
    cmd->add_option("file", *file, "JSON file with an array of ids")->required();
    cmd->callback([t, file] {
        auto tok = t->load();
        nlohmann::json j = nlohmann::json::parse(read_input(*file), nullptr, false);
        MT_CHECK(j.is_array(), *file, ": not a JSON array of ids");
        std::vector<int32_t> ids;
        for (const auto& v : j) {
            MT_CHECK(v.is_number_integer() && v.get<int64_t>() >= INT32_MIN &&
                         v.get<int64_t>() <= INT32_MAX,
                     *file, ": not a JSON array of ids");
            ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
        }
        std::string text = tok->decode(ids);
        std::fwrite(text.data(), 1, text.size(), stdout);
    });
}

}  // namespace

void add_tokenizer_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("tokenizer", "inspect, run and train tokenizers");
    cmd->require_subcommand(1);
    add_info(cmd);
    add_encode(cmd);
    add_decode(cmd);
    cmd->final_callback([&exit_code] { exit_code = 0; });
}

}  // namespace moetrain::cli
