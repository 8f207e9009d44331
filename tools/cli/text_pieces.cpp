#include "text_pieces.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "moetrain/error.h"
#include "moetrain/tokenizer.h"

namespace moetrain::cli {
namespace {

constexpr const char* kWhat = "--data file";

class ReadFd {
  public:
    explicit ReadFd(const std::string& path) : path_(path) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        MT_CHECK(fd_ >= 0, kWhat, " ", path, ": cannot open: ", std::strerror(errno));
        struct stat st {};
        if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd_);
            fail(kWhat, " ", path, ": not a regular file");
        }
        size_ = static_cast<uint64_t>(st.st_size);
    }
    ~ReadFd() { ::close(fd_); }
    ReadFd(const ReadFd&) = delete;
    ReadFd& operator=(const ReadFd&) = delete;
    uint64_t size() const { return size_; }
    // Bytes [begin, end), clipped to the file.
    std::string read(uint64_t begin, uint64_t end) const {
        end = std::min(end, size_);
        std::string out(begin < end ? static_cast<size_t>(end - begin) : 0, '\0');
        size_t got = 0;
        while (got < out.size()) {
            ssize_t n =
                ::pread(fd_, out.data() + got, out.size() - got, static_cast<off_t>(begin + got));
            if (n < 0 && errno == EINTR) continue;
            MT_CHECK(n >= 0, kWhat, " ", path_, ": read error: ", std::strerror(errno));
            MT_CHECK(n > 0, kWhat, " ", path_, ": shrank while being read");
            got += static_cast<size_t>(n);
        }
        return out;
    }

  private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

// The first allowed cut at or after `from` (the file's size when there is none), reading the
// file in windows from two bytes before `from` (next_line_cut looks back two bytes).
uint64_t find_cut(const ReadFd& f, uint64_t from, bool jsonl) {
    constexpr uint64_t kWindow = 64 << 10;
    for (uint64_t at = from; at < f.size(); at += kWindow) {
        const uint64_t start = at >= 2 ? at - 2 : 0;
        std::string w = f.read(start, at + kWindow);
        const size_t local = static_cast<size_t>(at - start);
        size_t p;
        if (jsonl) {
            // After any newline at or after `at` (a cut at `at` needs the newline at at-1).
            size_t nl = w.find('\n', local == 0 ? 0 : local - 1);
            p = nl == std::string::npos ? w.size() : nl + 1;
        } else {
            p = next_line_cut(w, local);
        }
        // A cut found at the window's end may be an artifact of the window: only accept it
        // when it is inside, or the window reached the end of the file.
        if (p < w.size() || start + w.size() >= f.size()) return std::min(start + p, f.size());
    }
    return f.size();
}

}  // namespace

std::vector<TextPiece> plan_text_pieces(const std::vector<std::string>& files, bool cut_text_files,
                                        uint64_t piece_bytes) {
    std::vector<TextPiece> pieces;
    piece_bytes = std::max<uint64_t>(piece_bytes, 1);
    for (size_t i = 0; i < files.size(); ++i) {
        ReadFd f(files[i]);
        const bool jsonl = std::filesystem::path(files[i]).extension() == ".jsonl";
        const bool cut = jsonl || cut_text_files;
        uint64_t begin = 0;
        while (begin < f.size()) {
            uint64_t end = cut && f.size() - begin > piece_bytes
                               ? find_cut(f, begin + piece_bytes, jsonl)
                               : f.size();
            pieces.push_back({i, begin, end, begin == 0 && !jsonl, jsonl});
            begin = end;
        }
    }
    return pieces;
}

std::string read_text_piece(const std::string& path, const TextPiece& piece) {
    return ReadFd(path).read(piece.begin, piece.end);
}

int64_t line_number_at(const std::string& path, uint64_t offset) {
    ReadFd f(path);
    int64_t line = 1;
    for (uint64_t at = 0; at < offset; at += 1 << 20) {
        std::string w = f.read(at, std::min(offset, at + (1 << 20)));
        line += std::count(w.begin(), w.end(), '\n');
    }
    return line;
}

}  // namespace moetrain::cli
