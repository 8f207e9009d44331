#include "tokenizer_choice.h"

#include "io/file.h"
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

void RunTokenizer::record(TrainState& state) const {
    state.tokenizer = spec;
    state.tokenizer_pattern = pattern;
    state.tokenizer_sha256 = sha256;
    state.tokenizer_file = file;
}

RunTokenizer run_tokenizer(const TokenizerChoice& choice, bool given,
                           const CheckpointInfo* resume) {
    RunTokenizer t;
    if (resume && !given) {
        const TrainState& s = resume->state;
        t.tokenizer = load_checkpoint_tokenizer(*resume);
        t.spec = s.tokenizer;
        t.pattern = s.tokenizer_pattern;
        t.sha256 = s.tokenizer_sha256;
        const std::string copy = tokenizer_copy_name(s.tokenizer);
        if (!copy.empty())
            t.file = io::read_file(resume->dir + "/" + copy, io::kCheckpointTokenizerFile);
        return t;
    }
    t.spec = choice.spec;
    t.pattern = choice.pattern;
    if (choice.spec != "bytes") {
        t.file = io::read_file(choice.spec, io::kTokenizerFile);
        t.sha256 = tokenizer_file_sha256(t.file);
        t.tokenizer = load_tokenizer_bytes(choice.spec, t.file, TokenizerOptions{choice.pattern});
    } else {
        t.tokenizer = make_bytes_tokenizer();
    }
    if (resume) {
        const TrainState& s = resume->state;
        MT_CHECK(t.sha256 == s.tokenizer_sha256 && t.pattern == s.tokenizer_pattern, "--tokenizer ",
                 choice.spec, " is not the tokenizer checkpoint ", resume->dir,
                 " was trained with (", s.tokenizer,
                 s.tokenizer == "bytes" ? "" : ", SHA-256 " + s.tokenizer_sha256.substr(0, 12),
                 "); leave --tokenizer out to use the checkpoint's copy");
    }
    return t;
}

std::shared_ptr<const Tokenizer> checkpoint_or_given_tokenizer(const TokenizerChoice& choice,
                                                               bool given,
                                                               const CheckpointInfo& info) {
    return given ? choice.load() : load_checkpoint_tokenizer(info);
}

}  // namespace moetrain::cli
