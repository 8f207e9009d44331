// Token shard files in llm.c's format (docs/DATA.md): a header of 256 little-endian int32
//   [0] magic, [1] version, [2] token count, the rest 0
// followed by the tokens. Two layouts, the ones llm.c writes:
//   magic 20240520, version 1: uint16 tokens (GPT-2 style vocabularies, <= 65536 ids)
//   magic 20240801, version 7: uint32 tokens (larger vocabularies, llm.c's Llama-3 shards)
// Shards are memory-mapped for training, so resident memory does not grow with the corpus.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "moetrain/data.h"

namespace moetrain {

inline constexpr int64_t kShardHeaderBytes = 256 * 4;

struct ShardHeader {
    int token_bytes = 2;  // 2 or 4
    int64_t tokens = 0;
};

// Validate a shard header (the first kShardHeaderBytes of `bytes`) against the file size;
// `name` starts every message. Errors: short header, bad magic or version, a token count that
// does not match the file size (truncated or trailing bytes).
ShardHeader parse_shard_header(std::string_view bytes, uint64_t file_size, const std::string& name);
// The 1024 header bytes of a shard of `tokens` ids of `token_bytes` bytes each.
std::string shard_header_bytes(int token_bytes, int64_t tokens);
// Token width for a vocabulary: 2 when every id fits in uint16, else 4.
int shard_token_bytes(int64_t vocab_size);
// True when the file starts with a shard magic; a file that cannot be opened or is not a
// regular file (a FIFO, a device) throws one line naming it.
bool is_shard_file(const std::string& path);

// Writes one shard atomically: append() gathers the tokens in memory; finish() writes header
// and tokens to "<path>.tmp-<pid>", fsyncs it and renames it to `path`. Nothing appears under
// `path` unless finish() succeeds.
class ShardWriter {
  public:
    ShardWriter(std::string path, int token_bytes);
    ~ShardWriter();
    ShardWriter(const ShardWriter&) = delete;
    ShardWriter& operator=(const ShardWriter&) = delete;
    void append(const int32_t* ids, size_t n);  // ids must fit token_bytes
    void finish();
    int64_t tokens() const { return tokens_; }

  private:
    std::string path_, tmp_;
    int token_bytes_;
    int64_t tokens_ = 0;
    std::vector<char> buf_;
};

// Shard files as one token stream (files in the given order; windows run across file
// boundaries), read with pread: a shard truncated while it is read throws one line naming it. Ids
// >= vocab_limit are reported with the file and offset when read. [begin, end) selects a sub-range
// of the concatenation (end < 0: to the end).
TokenStream open_shards(const std::vector<std::string>& files, int64_t vocab_limit,
                        int64_t begin = 0, int64_t end = -1);

// The files `spec` names: the file itself, a directory's regular files (those ending in
// `extension` when it is not empty), or a glob's matches; sorted. Errors: an empty directory,
// a glob that matches nothing.
std::vector<std::string> expand_file_spec(const std::string& spec, const std::string& extension);

// `--data` with shards: one shard file, a directory of *.bin shards, or a glob pattern.
// Files with "_val_" in their name form the validation set, the others the train set (names
// sorted). Errors: nothing matches, a matched file is not a valid shard.
struct ShardFiles {
    std::vector<std::string> train, val;
};
ShardFiles find_shards(const std::string& spec);

}  // namespace moetrain
