#include "tokenizer_choice.h"

#include <fstream>
#include <sstream>

#include "moetrain/error.h"

namespace moetrain::cli {

void TokenizerChoice::add_options(CLI::App* cmd) {
    cmd->add_option("--tokenizer", spec,
                    "bytes, a tokenizer.json, a *.tiktoken rank file or a SentencePiece *.model")
        ->capture_default_str();
    cmd->add_option("--tokenizer-pattern", pattern,
                    "split pattern of a tiktoken rank file: gpt2, cl100k or o200k");
}

std::shared_ptr<const Tokenizer> TokenizerChoice::load() const {
    return load_tokenizer(spec, TokenizerOptions{pattern});
}

std::string read_input_file(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    MT_CHECK(in.is_open(), what, " ", path, ": cannot open");
    std::ostringstream buf;
    buf << in.rdbuf();
    MT_CHECK(!in.bad(), what, " ", path, ": cannot read");
    return buf.str();
}

}  // namespace moetrain::cli
