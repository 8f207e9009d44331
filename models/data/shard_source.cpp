// Memory-mapped shard files read as one token stream. Every id is checked against the model's
// vocabulary as it is read (a scan at open time would page the whole corpus in). Resident
// memory stays flat: after every 16 MiB read, the mappings' pages are released with
// MADV_DONTNEED (the kernel's page cache keeps them; the next read maps them again).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "moetrain/error.h"
#include "moetrain/shards.h"

namespace moetrain {
namespace {

struct MappedShard {
    std::string path;
    void* map = nullptr;
    size_t map_bytes = 0;
    ShardHeader header;
    int64_t first = 0;  // global index of its first token
    const unsigned char* tokens() const {
        return static_cast<const unsigned char*>(map) + kShardHeaderBytes;
    }
};

class ShardTokens final : public TokenSource {
  public:
    ShardTokens(const std::vector<std::string>& files, int64_t vocab_limit, int64_t begin,
                int64_t end)
        : vocab_limit_(vocab_limit) {
        int64_t total = 0;
        for (const std::string& f : files) {
            shards_.push_back(map_shard(f));
            shards_.back().first = total;
            total += shards_.back().header.tokens;
        }
        begin_ = begin;
        end_ = end < 0 ? total : end;
        MT_CHECK(0 <= begin_ && begin_ <= end_ && end_ <= total, "shard range [", begin, ", ", end,
                 ") is outside the ", total, " tokens of the shards");
    }
    ~ShardTokens() override {
        for (MappedShard& s : shards_) ::munmap(s.map, s.map_bytes);
    }
    ShardTokens(const ShardTokens&) = delete;
    ShardTokens& operator=(const ShardTokens&) = delete;

    int64_t size() const override { return end_ - begin_; }

    void read(int64_t pos, int64_t n, int32_t* out) const override {
        // A fault maps more than it reads (fault-around, readahead): a read counts at least
        // 256 KiB, so that scattered small reads release pages too.
        release_pages_now_and_then(std::max<int64_t>(n * 4, int64_t{256} << 10));
        int64_t g = begin_ + pos;
        auto it = std::upper_bound(shards_.begin(), shards_.end(), g,
                                   [](int64_t v, const MappedShard& s) { return v < s.first; });
        size_t k = static_cast<size_t>(it - shards_.begin()) - 1;
        while (n > 0) {
            const MappedShard& s = shards_[k];
            int64_t off = g - s.first;
            int64_t take = std::min(n, s.header.tokens - off);
            const unsigned char* p = s.tokens() + off * s.header.token_bytes;
            for (int64_t i = 0; i < take; ++i) {
                uint32_t v = p[0] | (uint32_t{p[1]} << 8);
                if (s.header.token_bytes == 4) v |= (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
                p += s.header.token_bytes;
                MT_CHECK(v < static_cast<uint64_t>(vocab_limit_), "shard ", s.path, ": token ", v,
                         " at offset ", off + i, " is >= the model's vocab_size ", vocab_limit_);
                out[i] = static_cast<int32_t>(v);
            }
            out += take;
            n -= take;
            g += take;
            ++k;
        }
    }

  private:
    static MappedShard map_shard(const std::string& path) {
        MappedShard s;
        s.path = path;
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        MT_CHECK(fd >= 0, "shard ", path, ": cannot open: ", std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd);
            fail("shard ", path, ": not a regular file");
        }
        std::string head(static_cast<size_t>(kShardHeaderBytes), '\0');
        ssize_t got = ::pread(fd, head.data(), head.size(), 0);
        head.resize(got > 0 ? static_cast<size_t>(got) : 0);
        try {
            s.header = parse_shard_header(head, static_cast<uint64_t>(st.st_size), path);
        } catch (...) {
            ::close(fd);
            throw;
        }
        s.map_bytes = static_cast<size_t>(st.st_size);
        s.map = ::mmap(nullptr, s.map_bytes, PROT_READ, MAP_SHARED, fd, 0);
        ::close(fd);
        MT_CHECK(s.map != MAP_FAILED, "shard ", path, ": cannot map: ", std::strerror(errno));
        return s;
    }

    void release_pages_now_and_then(int64_t bytes) const {
        constexpr int64_t kRelease = int64_t{16} << 20;
        if (read_since_release_.fetch_add(bytes) + bytes < kRelease) return;
        read_since_release_ = 0;
        for (const MappedShard& s : shards_) ::madvise(s.map, s.map_bytes, MADV_DONTNEED);
    }

    std::vector<MappedShard> shards_;
    int64_t vocab_limit_;
    int64_t begin_ = 0, end_ = 0;
    mutable std::atomic<int64_t> read_since_release_{0};
};

}  // namespace

TokenStream open_shards(const std::vector<std::string>& files, int64_t vocab_limit, int64_t begin,
                        int64_t end) {
    MT_CHECK(!files.empty(), "no shard files");
    return std::make_shared<const ShardTokens>(files, vocab_limit, begin, end);
}

}  // namespace moetrain
