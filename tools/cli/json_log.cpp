// JsonLog: O_APPEND / O_TRUNC file, full-write loop with EINTR retry, checked close.
#include "json_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "moetrain/error.h"

namespace moetrain::cli {

JsonLog::JsonLog(std::string path, bool append) : path_(std::move(path)) {
    auto parent = std::filesystem::path(path_).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    const int mode = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
    fd_ = ::open(path_.c_str(), mode, 0644);
    MT_CHECK(fd_ >= 0, "--log-json: cannot write ", path_, ": ", std::strerror(errno));
}

JsonLog::~JsonLog() {
    if (fd_ >= 0) ::close(fd_);
}

std::string JsonLog::write_line(const std::string& line) {
    if (fd_ < 0) return "the file is closed";
    const std::string text = line + "\n";
    const char* p = text.data();
    size_t left = text.size();
    while (left > 0) {
        ssize_t n = ::write(fd_, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? std::strerror(errno) : "nothing written";
        p += n;
        left -= static_cast<size_t>(n);
    }
    return "";
}

std::string JsonLog::close() {
    if (fd_ < 0) return "";
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? "" : std::strerror(errno);
}

}  // namespace moetrain::cli
