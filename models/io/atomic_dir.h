// Atomic directory creation for checkpoints: files are written into a sibling
// `<dir>.tmp-<pid>`, every file and the directory are fsynced, then the directory is renamed
// to its final name (atomically swapped with an existing one) and the parent is fsynced.
// A crash at any moment leaves either the old directory or the complete new one in place,
// plus at most a stale `.tmp-<pid>` sibling, which loaders never pick up.
#pragma once

#include <string>

namespace moetrain::io {

class AtomicDirWriter {
  public:
    // Resolves `final_dir` (io/out_path.h: `..` against the real parent, links followed), so
    // that `MISSING/../EXISTING` replaces EXISTING only when that is what the caller checked;
    // creates missing parent directories and the temporary directory with its marker file.
    explicit AtomicDirWriter(const std::string& final_dir);
    // Removes the temporary directory unless commit() succeeded.
    ~AtomicDirWriter();
    AtomicDirWriter(const AtomicDirWriter&) = delete;
    AtomicDirWriter& operator=(const AtomicDirWriter&) = delete;

    // Path of a file inside the temporary directory (the caller writes and fsyncs it).
    std::string file(const std::string& name) const { return tmp_ + "/" + name; }
    const std::string& tmp_dir() const { return tmp_; }
    const std::string& final_dir() const { return final_; }
    const std::string& parent_dir() const { return parent_; }
    // fsync the temporary directory, move it to the final name, fsync the parent.
    void commit();

  private:
    std::string final_, tmp_, parent_;
    bool committed_ = false;
};

// Name of the temporary sibling of `final_dir` for process `pid`: "<final_dir>.tmp-<pid>".
std::string atomic_tmp_name(const std::string& final_dir, long pid);

// Remove temporary directories `*.tmp-<pid>` directly inside `parent` whose process no
// longer exists (never this process's own) and that hold the marker file AtomicDirWriter
// puts into each (".moetrain-partial" with its exact text; a real directory, not a
// symlink). Anything else with such a name is left alone. Returns how many were removed.
int remove_stale_tmp_dirs(const std::string& parent);

}  // namespace moetrain::io
