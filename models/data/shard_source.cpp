// Shard files read as one token stream, with pread into a bounded buffer: resident memory stays
// flat (the kernel's page cache holds the files, not this process), and a shard truncated or
// replaced by a shorter file while a run reads it ends in one line naming it, never in the
// SIGBUS a memory mapping would raise (docs/DATA.md, "Shards that change under a run"). Every
// id is checked against the model's vocabulary as it is read (a scan at open time would read
// the whole corpus).
#include <sys/resource.h>

#include <algorithm>

#include "io/file.h"
#include "moetrain/error.h"
#include "moetrain/shards.h"

namespace moetrain {
namespace {

static_assert(io::kShardFile.max_bytes == kShardHeaderBytes + 4 * uint64_t{INT32_MAX});

struct OpenShard {
    io::InputFile file;
    ShardHeader header;
    int64_t first = 0;  // global index of its first token
};

// Every shard stays open for the run: raise the soft limit of open files towards the hard one
// when a corpus has many shards (past the hard limit, the open fails naming the shard).
void allow_open_files(size_t shards) {
    struct rlimit r {};
    const rlim_t want = static_cast<rlim_t>(shards) + 256;
    if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= want) return;
    r.rlim_cur = r.rlim_max == RLIM_INFINITY ? want : std::min(want, r.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &r);
}

class ShardTokens final : public TokenSource {
  public:
    ShardTokens(const std::vector<std::string>& files, int64_t vocab_limit, int64_t begin,
                int64_t end)
        : vocab_limit_(vocab_limit) {
        allow_open_files(files.size());
        int64_t total = 0;
        shards_.reserve(files.size());
        for (const std::string& f : files) {
            shards_.push_back(open_shard(f));
            shards_.back().first = total;
            total += shards_.back().header.tokens;
        }
        begin_ = begin;
        end_ = end < 0 ? total : end;
        MT_CHECK(0 <= begin_ && begin_ <= end_ && end_ <= total, "shard range [", begin, ", ", end,
                 ") is outside the ", total, " tokens of the shards");
    }

    int64_t size() const override { return end_ - begin_; }

    void read(int64_t pos, int64_t n, int32_t* out) const override {
        int64_t g = begin_ + pos;
        auto it = std::upper_bound(shards_.begin(), shards_.end(), g,
                                   [](int64_t v, const OpenShard& s) { return v < s.first; });
        size_t k = static_cast<size_t>(it - shards_.begin()) - 1;
        while (n > 0) {
            const OpenShard& s = shards_[k];
            const int64_t off = g - s.first;
            const int64_t take = std::min(n, s.header.tokens - off);
            read_tokens(s, off, take, out);
            out += take;
            n -= take;
            g += take;
            ++k;
        }
    }

  private:
    static OpenShard open_shard(const std::string& path) {
        io::InputFile file(path, io::kShardFile);
        const std::string head = file.read_range(0, static_cast<uint64_t>(kShardHeaderBytes));
        ShardHeader header = parse_shard_header(head, file.size(), path);
        return OpenShard{std::move(file), header, 0};
    }

    // Tokens [off, off + take) of one shard, read in 64 KiB pieces.
    void read_tokens(const OpenShard& s, int64_t off, int64_t take, int32_t* out) const {
        const int width = s.header.token_bytes;
        unsigned char buf[64 << 10];
        const int64_t per_piece = static_cast<int64_t>(sizeof buf) / width;
        for (int64_t done = 0; done < take;) {
            const int64_t m = std::min(per_piece, take - done);
            s.file.read_at(static_cast<uint64_t>(kShardHeaderBytes + (off + done) * width), buf,
                           static_cast<size_t>(m * width));
            const unsigned char* p = buf;
            for (int64_t i = 0; i < m; ++i, p += width) {
                uint32_t v = p[0] | (uint32_t{p[1]} << 8);
                if (width == 4) v |= (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
                MT_CHECK(v < static_cast<uint64_t>(vocab_limit_), "shard ", s.file.path(),
                         ": token ", v, " at offset ", off + done + i,
                         " is >= the model's vocab_size ", vocab_limit_);
                out[done + i] = static_cast<int32_t>(v);
            }
            done += m;
        }
    }

    std::vector<OpenShard> shards_;
    int64_t vocab_limit_;
    int64_t begin_ = 0, end_ = 0;
};

}  // namespace

TokenStream open_shards(const std::vector<std::string>& files, int64_t vocab_limit, int64_t begin,
                        int64_t end) {
    MT_CHECK(!files.empty(), "no shard files");
    return std::make_shared<const ShardTokens>(files, vocab_limit, begin, end);
}

}  // namespace moetrain
