// resolve_path: component by component, following links with readlink, never trusting `..`
// of a directory that does not exist.
#include "io/out_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "moetrain/error.h"

namespace fs = std::filesystem;

namespace moetrain::io {
namespace {

constexpr int kMaxLinks = 40;  // the kernel's limit (ELOOP)

// `rel` (absolute, or relative to the resolved directory `base`) resolved; `links` counts the
// links followed so far.
fs::path resolve_from(const fs::path& base, const fs::path& rel, int& links,
                      const std::string& shown, const std::string& what) {
    fs::path cur = rel.is_absolute() ? fs::path("/") : base;
    for (const fs::path& part : rel.relative_path()) {
        const std::string c = part.string();
        if (c.empty() || c == ".") continue;
        if (c == "..") {  // `cur` is resolved: its parent is the real one
            cur = cur.parent_path();
            continue;
        }
        const fs::path next = cur / part;
        struct stat st {};
        if (::lstat(next.c_str(), &st) != 0) {
            MT_CHECK(errno == ENOENT || errno == ENOTDIR, what, " ", shown, ": cannot resolve ",
                     next.string(), ": ", std::strerror(errno));
            cur = next;  // does not exist yet: created as a real directory or file later
            continue;
        }
        if (!S_ISLNK(st.st_mode)) {
            cur = next;
            continue;
        }
        MT_CHECK(++links <= kMaxLinks, what, " ", shown,
                 ": too many levels of symbolic links (a loop?)");
        char target[PATH_MAX];
        const ssize_t n = ::readlink(next.c_str(), target, sizeof target - 1);
        MT_CHECK(n >= 0, what, " ", shown, ": cannot read the link ", next.string(), ": ",
                 std::strerror(errno));
        cur = resolve_from(cur, fs::path(std::string(target, static_cast<size_t>(n))), links, shown,
                           what);
    }
    return cur;
}

}  // namespace

std::string resolve_path(const std::string& path, const std::string& what) {
    MT_CHECK(!path.empty(), what, ": empty path");
    std::error_code ec;
    const fs::path cwd = fs::current_path(ec);
    MT_CHECK(!ec, what, " ", path, ": cannot read the working directory: ", ec.message());
    int links = 0;
    // The working directory is resolved as well (it may be reached through a link).
    const fs::path base = resolve_from(fs::path("/"), cwd, links, path, what);
    links = 0;
    return resolve_from(base, fs::path(path), links, path, what).string();
}

bool path_within(const std::string& inner, const std::string& outer) {
    if (inner == outer) return true;
    if (outer == "/") return !inner.empty() && inner.front() == '/';
    return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
           inner[outer.size()] == '/';
}

}  // namespace moetrain::io
