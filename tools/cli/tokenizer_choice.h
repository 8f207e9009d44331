// --tokenizer SPEC and --tokenizer-pattern NAME, shared by every command that reads or writes
// text (moetrain/tokenizer.h lists the specs).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "moetrain/tokenizer.h"

namespace moetrain::cli {

struct TokenizerChoice {
    std::string spec = "bytes";
    std::string pattern;
    void add_options(CLI::App* cmd);
    std::shared_ptr<const Tokenizer> load() const;
};

// A whole file's bytes; errors read "<what> <path>: cannot read".
std::string read_input_file(const std::string& path, const std::string& what);

}  // namespace moetrain::cli
