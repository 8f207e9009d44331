// POSIX implementations of io_file.h: EINTR-safe write loops, fsync of files and directories.
#include "io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/crc32c.h"
#include "moetrain/error.h"

namespace moetrain::io {
namespace {

std::string errno_text() {
    return std::strerror(errno);
}

}  // namespace

std::string read_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    MT_CHECK(fd >= 0, what, " ", path, ": cannot open: ", errno_text());
    std::string out;
    struct stat st;
    const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (!regular) {
        ::close(fd);
        fail(what, " ", path, ": not a regular file");
    }
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
        ::close(fd);
        fail(what, " ", path, ": ", st.st_size, " bytes, more than the limit of ", max_bytes);
    }
    out.reserve(static_cast<size_t>(st.st_size));
    char chunk[1 << 16];
    for (;;) {
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            std::string reason = errno_text();
            ::close(fd);
            fail(what, " ", path, ": read error: ", reason);
        }
        if (n == 0) break;
        if (out.size() + static_cast<size_t>(n) > max_bytes) {  // grew while being read
            ::close(fd);
            fail(what, " ", path, ": more than the limit of ", max_bytes, " bytes");
        }
        out.append(chunk, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
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
