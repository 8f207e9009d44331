// Atomic shard writing: a shard's tokens are gathered in memory (as llm.c does), then header and
// tokens go to a temporary sibling that is fsynced and only then renamed to the final name.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "io/file.h"
#include "moetrain/error.h"
#include "moetrain/shards.h"

namespace moetrain {

ShardWriter::ShardWriter(std::string path, int token_bytes)
    : path_(std::move(path)), tmp_(io::temp_file_name(path_)), token_bytes_(token_bytes) {
    MT_CHECK(token_bytes == 2 || token_bytes == 4, "shard token width must be 2 or 4 bytes");
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::append(const int32_t* ids, size_t n) {
    const int64_t limit = token_bytes_ == 2 ? 65536 : INT64_C(1) << 32;
    buf_.reserve(buf_.size() + n * static_cast<size_t>(token_bytes_));
    for (size_t i = 0; i < n; ++i) {
        MT_CHECK(ids[i] >= 0 && ids[i] < limit, "token id ", ids[i], " does not fit a ",
                 token_bytes_ * 8, "-bit shard");
        auto v = static_cast<uint32_t>(ids[i]);
        for (int b = 0; b < token_bytes_; ++b)
            buf_.push_back(static_cast<char>((v >> (8 * b)) & 0xFF));
    }
    tokens_ += static_cast<int64_t>(n);
}

void ShardWriter::finish() {
    const std::string header = shard_header_bytes(token_bytes_, tokens_);
    io::SyncedFile f(tmp_, io::Create::exclusive);  // nothing of ours exists if this throws
    try {
        f.write(header.data(), header.size());
        f.write(buf_.data(), buf_.size());
        f.finish();
        MT_CHECK(::rename(tmp_.c_str(), path_.c_str()) == 0, "shard ", path_,
                 ": cannot rename the finished file into place: ", std::strerror(errno));
    } catch (...) {
        ::unlink(tmp_.c_str());
        throw;
    }
    std::vector<char>().swap(buf_);
    const size_t slash = path_.rfind('/');
    io::fsync_dir(slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash));
}

}  // namespace moetrain
