// POSIX implementations of io/file.h: the bounded input reader, EINTR-safe write loops, fsync of
// files and directories.
#include "io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/crc32c.h"
#include "moetrain/error.h"

namespace moetrain::io {
namespace {

std::string errno_text() {
    return std::strerror(errno);
}

// "64 MiB", "1 GiB" for a limit that is a whole number of them, else the bytes.
std::string limit_text(uint64_t bytes) {
    if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
    return std::to_string(bytes) + " bytes";
}

}  // namespace

InputFile::InputFile(std::string path, const FileKind& kind) : path_(std::move(path)), kind_(kind) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) fail_read("cannot open: " + errno_text());
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd_);
        fd_ = -1;
        fail_read("not a regular file");
    }
    // Regular files ignore O_NONBLOCK; clear it all the same so reads are plain reads.
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ > kind_.max_bytes) {
        ::close(fd_);
        fd_ = -1;
        fail_read(std::to_string(size_) + " bytes, more than the limit of " +
                  limit_text(kind_.max_bytes) + " for a " + kind_.what);
    }
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)),
      kind_(other.kind_),
      fd_(other.fd_),
      size_(other.size_),
      consumed_(other.consumed_) {
    other.fd_ = -1;
}

void InputFile::fail_read(const std::string& problem) const {
    fail(kind_.what, " ", path_, ": ", problem);
}

void InputFile::read_at(uint64_t offset, void* dst, size_t n) const {
    char* out = static_cast<char*>(dst);
    size_t got = 0;
    while (got < n) {
        ssize_t r = ::pread(fd_, out + got, n - got, static_cast<off_t>(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) fail_read("read error: " + errno_text());
        if (r == 0) {
            struct stat st {};
            const std::string now =
                ::fstat(fd_, &st) == 0 ? std::to_string(st.st_size) + " bytes" : "fewer bytes";
            fail_read("changed while being read: it now has " + now + ", it had " +
                      std::to_string(size_) + " when opened (byte " + std::to_string(offset + got) +
                      " is gone)");
        }
        got += static_cast<size_t>(r);
    }
}

std::string InputFile::read_range(uint64_t begin, uint64_t end) const {
    end = std::min(end, size_);
    std::string out(begin < end ? static_cast<size_t>(end - begin) : 0, '\0');
    read_at(begin, out.data(), out.size());
    return out;
}

size_t InputFile::read_next(void* dst, size_t n) {
    for (;;) {
        ssize_t r = ::read(fd_, dst, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) fail_read("read error: " + errno_text());
        consumed_ += static_cast<uint64_t>(r);
        if (consumed_ > kind_.max_bytes)  // grew while being read
            fail_read("grew while being read to more than the limit of " +
                      limit_text(kind_.max_bytes) + " for a " + kind_.what);
        return static_cast<size_t>(r);
    }
}

std::string InputFile::read_rest() {
    std::string out;
    out.reserve(static_cast<size_t>(size_ - std::min(size_, consumed_)));
    char chunk[1 << 16];
    while (size_t n = read_next(chunk, sizeof chunk)) out.append(chunk, n);
    return out;
}

std::string read_file(const std::string& path, const FileKind& kind) {
    return InputFile(path, kind).read_rest();
}

SyncedFile::SyncedFile(std::string path, Create mode) : path_(std::move(path)) {
    const int how = mode == Create::exclusive ? O_EXCL | O_NOFOLLOW : O_TRUNC;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | how, 0644);
    MT_CHECK(fd_ >= 0, "cannot create ", path_, ": ", errno_text(),
             mode == Create::exclusive && errno == EEXIST
                 ? " (a temporary file must be new; remove the one there)"
                 : "");
}

SyncedFile::~SyncedFile() {
    if (fd_ >= 0) ::close(fd_);
}

void SyncedFile::write(const void* data, size_t bytes) {
    MT_CHECK(fd_ >= 0, "write to closed file ", path_);
    crc_ = crc32c(data, bytes, crc_);
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
        ssize_t n = ::write(fd_, p, bytes);
        if (n < 0 && errno == EINTR) continue;
        MT_CHECK(n > 0, "write error on ", path_, ": ", errno_text());
        p += n;
        bytes -= static_cast<size_t>(n);
    }
}

void SyncedFile::finish() {
    MT_CHECK(fd_ >= 0, "file ", path_, " finished twice");
    int rc = ::fsync(fd_);
    std::string reason = rc != 0 ? errno_text() : "";
    rc = ::close(fd_) | rc;
    if (reason.empty() && rc != 0) reason = errno_text();
    fd_ = -1;
    MT_CHECK(rc == 0, "cannot sync ", path_, ": ", reason);
}

void write_file_synced(const std::string& path, const std::string& content) {
    SyncedFile f(path);
    f.write(content.data(), content.size());
    f.finish();
}

std::string temp_file_name(const std::string& final_path) {
    return final_path + ".tmp-" + std::to_string(::getpid());
}

void write_file_atomic(const std::string& final_path, const std::string& content,
                       const std::string& what) {
    const std::string tmp = temp_file_name(final_path);
    try {
        SyncedFile f(tmp, Create::exclusive);
        try {
            f.write(content.data(), content.size());
            f.finish();
        } catch (const Error&) {
            ::unlink(tmp.c_str());  // ours: created exclusively above
            throw;
        }
        if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
            const std::string reason = errno_text();
            ::unlink(tmp.c_str());
            fail("cannot rename ", tmp, " into place: ", reason);
        }
    } catch (const Error& e) {
        fail(what, " ", final_path, ": cannot write: ", e.what());
    }
    const size_t slash = final_path.rfind('/');
    fsync_dir(slash == std::string::npos ? "." : slash == 0 ? "/" : final_path.substr(0, slash));
}

void fsync_dir(const std::string& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    MT_CHECK(fd >= 0, "cannot open directory ", dir, ": ", errno_text());
    int rc = ::fsync(fd);
    // Some file systems cannot sync a directory (EINVAL): their renames are as durable as
    // they get, so that is not an error.
    bool ok = rc == 0 || errno == EINVAL;
    std::string reason = ok ? "" : errno_text();
    ::close(fd);
    MT_CHECK(ok, "cannot sync directory ", dir, ": ", reason);
}

}  // namespace moetrain::io
