// The tokenizer that travels with a checkpoint: a copy of its file next to state.json, whose
// SHA-256 state.json records (docs/CHECKPOINTS.md).
#include "io/file.h"
#include "io/sha256.h"
#include "moetrain/checkpoint.h"
#include "moetrain/error.h"

namespace moetrain {

std::shared_ptr<const Tokenizer> load_checkpoint_tokenizer(const CheckpointInfo& info) {
    const TrainState& s = info.state;
    const std::string name = tokenizer_copy_name(s.tokenizer);
    if (name.empty()) return make_bytes_tokenizer();
    const std::string path = info.dir + "/" + name;
    std::string bytes = io::read_file(path, io::kCheckpointTokenizerFile);
    MT_CHECK(io::sha256_hex(bytes) == s.tokenizer_sha256, "checkpoint file ", path,
             ": SHA-256 differs from state.json's data.tokenizer_sha256 (corrupt copy)");
    return load_tokenizer_bytes(path, bytes, TokenizerOptions{s.tokenizer_pattern});
}

}  // namespace moetrain
