// Small POSIX file helpers for checkpoints and data: whole-file reads with one-line errors,
// a write handle that fsyncs before closing, and directory fsync.
#pragma once

#include <cstdint>
#include <string>

namespace moetrain::io {

// Whole file as bytes; errors read "<what> <path>: <reason>". Only regular files are read
// (a device such as /dev/zero or a FIFO would never end), and at most `max_bytes` of them.
std::string read_file(const std::string& path, const std::string& what,
                      uint64_t max_bytes = UINT64_MAX);

// The size limit of the JSON files moetrain reads (configs, state.json): far above any real
// one, far below what would strain the host.
inline constexpr uint64_t kMaxJsonFileBytes = 64u << 20;

// A file written sequentially; finish() fsyncs and closes it. Destroying an unfinished
// handle closes it without syncing (the caller is failing anyway). `Create::truncate`
// replaces a file of that name; `Create::exclusive` (every temporary file) makes a new one
// with O_EXCL | O_NOFOLLOW: a file or a symbolic link already there is an error, never
// followed or overwritten.
enum class Create { truncate, exclusive };
class SyncedFile {
  public:
    explicit SyncedFile(std::string path, Create mode = Create::truncate);
    ~SyncedFile();
    SyncedFile(const SyncedFile&) = delete;
    SyncedFile& operator=(const SyncedFile&) = delete;
    void write(const void* data, size_t bytes);
    void finish();
    const std::string& path() const { return path_; }
    // CRC32C of everything written so far.
    uint32_t crc() const { return crc_; }

  private:
    std::string path_;
    int fd_ = -1;
    uint32_t crc_ = 0;
};

// Write `content` to `path` and fsync it.
void write_file_synced(const std::string& path, const std::string& content);

// The temporary name of `final_path` for this process: "<final_path>.tmp-<pid>". Temporary
// files are made only by SyncedFile(..., Create::exclusive) under such a name.
std::string temp_file_name(const std::string& final_path);

// `content` under `final_path`, never partial: written to temp_file_name(final_path)
// (created exclusively), fsynced, renamed over `final_path`, and the directory fsynced.
// Errors read "<what> <final_path>: <reason>"; the temporary file is removed on failure.
void write_file_atomic(const std::string& final_path, const std::string& content,
                       const std::string& what);

// fsync a directory so that entries created or renamed in it are durable.
void fsync_dir(const std::string& dir);

}  // namespace moetrain::io
