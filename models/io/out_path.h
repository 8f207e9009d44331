// The path an output will really have: `..` taken against the real parent, symbolic links
// followed (also dangling ones, whose target a write would create), so that every check of
// an output looks at the file the write will touch.
#pragma once

#include <string>

namespace moetrain::io {

// `path` as an absolute path without symbolic links, `.` or `..`: the longest existing prefix
// is resolved as the kernel resolves it (a link's target, `..` of a real directory), and the
// components that do not exist yet are appended with `..` applied to what precedes it, as
// the kernel will apply it once the missing directories are made. So `MISSING/../EXISTING`
// is EXISTING. Throws "<what> PATH: ..." for an empty path or a loop of links.
std::string resolve_path(const std::string& path, const std::string& what = "path");

// Is `inner` the path `outer` or below it? (Both resolved.)
bool path_within(const std::string& inner, const std::string& outer);

}  // namespace moetrain::io
