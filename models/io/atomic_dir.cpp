// AtomicDirWriter: temporary sibling directory, fsync, rename / RENAME_EXCHANGE, parent fsync;
// and the cleaner of temporary directories left behind by killed processes.
#include "io/atomic_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

#include "io/file.h"
#include "io/out_path.h"
#include "moetrain/error.h"

namespace fs = std::filesystem;

namespace moetrain::io {
namespace {

std::string strip_trailing_slashes(std::string p) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
}

bool process_alive(long pid) {
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// The marker file this program puts into every temporary directory it creates, and its
// exact contents: the cleaner removes only directories holding it, so that a user's
// "thesis.tmp-31000" folder is never taken for a left-over.
constexpr const char* kMarkerName = ".moetrain-partial";
constexpr const char* kMarkerText = "moetrain: partial checkpoint directory, safe to delete\n";

// Is `dir` (not followed if it is a symlink) a real directory holding our marker as a
// regular file with exactly the marker text?
bool is_our_tmp_dir(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(dir, ec))) return false;
    const fs::path marker = dir / kMarkerName;
    if (!fs::is_regular_file(fs::symlink_status(marker, ec))) return false;
    int fd = ::open(marker.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[128];
    ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    return n >= 0 && std::string(buf, static_cast<size_t>(n)) == kMarkerText;
}

// Replace the existing directory `dst` by `src`. RENAME_EXCHANGE swaps them in one step; on
// file systems without it, `dst` is first moved aside to "<dst>.old-<pid>".
void replace_dir(const std::string& src, const std::string& dst) {
    if (::renameat2(AT_FDCWD, src.c_str(), AT_FDCWD, dst.c_str(), RENAME_EXCHANGE) == 0) {
        std::error_code ec;
        fs::remove_all(src, ec);  // now holds the previous contents of dst
        return;
    }
    MT_CHECK(errno == EINVAL || errno == ENOSYS, "cannot replace ", dst, " by ", src, ": ",
             std::strerror(errno));
    std::string old = dst + ".old-" + std::to_string(::getpid());
    MT_CHECK(::rename(dst.c_str(), old.c_str()) == 0, "cannot move ", dst, " aside to ", old, ": ",
             std::strerror(errno));
    MT_CHECK(::rename(src.c_str(), dst.c_str()) == 0, "cannot rename ", src, " to ", dst, ": ",
             std::strerror(errno), " (the previous directory is kept as ", old, ")");
    std::error_code ec;
    fs::remove_all(old, ec);
}

}  // namespace

std::string atomic_tmp_name(const std::string& final_dir, long pid) {
    return strip_trailing_slashes(final_dir) + ".tmp-" + std::to_string(pid);
}

AtomicDirWriter::AtomicDirWriter(const std::string& final_dir)
    : final_(resolve_path(final_dir, "output directory")),
      tmp_(atomic_tmp_name(final_, ::getpid())) {
    MT_CHECK(final_ != "/", "output directory ", final_dir, ": cannot replace the root directory");
    parent_ = fs::path(final_).parent_path().string();
    if (parent_.empty()) parent_ = ".";
    std::error_code ec;
    fs::create_directories(parent_, ec);
    MT_CHECK(!ec, "cannot create directory ", parent_, ": ", ec.message());
    fs::remove_all(tmp_, ec);  // left by an earlier failed attempt of this very process
    MT_CHECK(::mkdir(tmp_.c_str(), 0755) == 0, "cannot create directory ", tmp_, ": ",
             std::strerror(errno));
    try {
        write_file_synced(tmp_ + "/" + kMarkerName, kMarkerText);
    } catch (const Error&) {
        fs::remove_all(tmp_, ec);  // the destructor does not run for a failed constructor
        throw;
    }
}

AtomicDirWriter::~AtomicDirWriter() {
    if (committed_) return;
    std::error_code ec;
    fs::remove_all(tmp_, ec);
}

void AtomicDirWriter::commit() {
    MT_CHECK(!committed_, "directory ", final_, " committed twice");
    // The marker goes before the rename: a committed directory holds only what the caller
    // wrote. A kill between the two leaves an unmarked temporary, which is never deleted.
    const std::string marker = tmp_ + "/" + kMarkerName;
    MT_CHECK(::unlink(marker.c_str()) == 0, "cannot remove ", marker, ": ", std::strerror(errno));
    fsync_dir(tmp_);
    std::error_code ec;
    auto status = fs::symlink_status(final_, ec);
    if (!fs::exists(status)) {
        MT_CHECK(::rename(tmp_.c_str(), final_.c_str()) == 0, "cannot rename ", tmp_, " to ",
                 final_, ": ", std::strerror(errno));
    } else {
        MT_CHECK(fs::is_directory(status), final_, " exists and is not a directory");
        replace_dir(tmp_, final_);
    }
    committed_ = true;
    fsync_dir(parent_);
}

int remove_stale_tmp_dirs(const std::string& parent) {
    static const std::regex tmp_name(R"(.+\.tmp-([0-9]{1,10}))");
    std::error_code ec;
    int removed = 0;
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
        std::smatch m;
        std::string name = entry.path().filename().string();
        if (!std::regex_match(name, m, tmp_name)) continue;
        long pid = std::stol(m[1].str());
        if (pid <= 0 || pid > INT_MAX || pid == ::getpid() || process_alive(pid)) continue;
        if (!is_our_tmp_dir(entry.path())) continue;  // not made by this program: never touched
        std::error_code rm_ec;
        fs::remove_all(entry.path(), rm_ec);
        if (!rm_ec) ++removed;
    }
    return removed;
}

}  // namespace moetrain::io
