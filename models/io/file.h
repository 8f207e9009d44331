// Small POSIX file helpers: the one reader of every file a user names (bounded, regular files
// only, never blocking on a FIFO), a write handle that fsyncs before closing, and directory fsync.
#pragma once

#include <cstdint>
#include <string>

namespace moetrain::io {

// A kind of input file: what messages call it ("config file", "shard", ...) and the most bytes
// of it that moetrain reads. A larger file is refused before a byte of it is read.
struct FileKind {
    const char* what;
    uint64_t max_bytes;
};

// The size limit of the JSON files moetrain reads (configs, state.json, import's config.json
// and index): far above any real one, far below what would strain the host.
inline constexpr uint64_t kMaxJsonFileBytes = 64u << 20;
// Files read whole into memory that are not JSON: a tokenizer's file (the largest real ones,
// tokenizer.json of 256k-token vocabularies, are about 35 MB) and the text a command reads whole.
inline constexpr uint64_t kMaxTokenizerFileBytes = 64u << 20;
inline constexpr uint64_t kMaxWholeTextBytes = uint64_t{1} << 30;
// Files read in bounded pieces, whatever their size: only their own format limits them.
inline constexpr uint64_t kStreamedFile = UINT64_MAX;

inline constexpr FileKind kConfigFile{"config file", kMaxJsonFileBytes};
inline constexpr FileKind kCheckpointStateFile{"checkpoint file", kMaxJsonFileBytes};
inline constexpr FileKind kIndexFile{"index file", kMaxJsonFileBytes};
// The manifest a command writes beside its output (.moetrain-output.json, out_manifest.h).
inline constexpr FileKind kOutputManifestFile{"output manifest", kMaxJsonFileBytes};
inline constexpr FileKind kTokenizerFile{"tokenizer file", kMaxTokenizerFileBytes};
inline constexpr FileKind kCheckpointTokenizerFile{"checkpoint file", kMaxTokenizerFileBytes};
inline constexpr FileKind kCheckpointDataFile{"checkpoint file", kStreamedFile};
inline constexpr FileKind kSafetensorsFile{"safetensors file", kStreamedFile};
// `train --data FILE.txt` and `tokenizer train --data` read a text file whole (larger corpora:
// `moetrain tokenize` reads them in pieces); `tokenize` reads in pieces, shards by token.
inline constexpr FileKind kTextDataFile{"data file", kMaxWholeTextBytes};
inline constexpr FileKind kTrainerTextFile{"--data file", kMaxWholeTextBytes};
inline constexpr FileKind kTextPiecesFile{"--data file", kStreamedFile};
// Any `--data` file while its first bytes tell a token shard from text; a shard (llm.c format:
// a 1 KiB header and at most INT32_MAX tokens of at most 4 bytes) is read in pieces.
inline constexpr FileKind kDataFile{"data file", kStreamedFile};
inline constexpr FileKind kShardFile{"shard", 1024 + 4 * uint64_t{INT32_MAX}};
// `tokenizer encode/decode FILE`.
inline constexpr FileKind kCommandInputFile{"input file", kMaxWholeTextBytes};
// `report`'s --log-json file, read line by line.
inline constexpr FileKind kRunLogFile{"training log", uint64_t{16} << 30};

// An input file opened for reading. The open never blocks (O_NONBLOCK: a FIFO with no writer
// would wait forever), then the descriptor itself is checked (fstat, no race with a rename):
// anything but a regular file (FIFO, device, directory, socket) is refused, and so is a file
// larger than the kind's limit. Every error is one line "<what> <path>: <problem>", naming
// the limit where there is one; a file that shrinks or grows while it is read says so.
class InputFile {
  public:
    InputFile(std::string path, const FileKind& kind);
    ~InputFile();
    InputFile(InputFile&& other) noexcept;
    InputFile& operator=(InputFile&&) = delete;
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    const std::string& path() const { return path_; }
    uint64_t size() const { return size_; }  // at open
    // Exactly bytes [offset, offset + n) into dst (thread-safe: pread), or one line naming the
    // file when it now ends before them (truncated while being read).
    void read_at(uint64_t offset, void* dst, size_t n) const;
    // Bytes [begin, end) clipped to the size at open, as read_at reads them.
    std::string read_range(uint64_t begin, uint64_t end) const;
    // The next at most n bytes of a sequential read; 0 at the end of the file. A file that grew
    // past the kind's limit while being read is refused.
    size_t read_next(void* dst, size_t n);
    // Everything from the current position to the end of the file.
    std::string read_rest();
    [[noreturn]] void fail_read(const std::string& problem) const;

  private:
    std::string path_;
    FileKind kind_;
    int fd_ = -1;
    uint64_t size_ = 0;
    uint64_t consumed_ = 0;  // bytes read by read_next
};

// A whole file as bytes, through InputFile.
std::string read_file(const std::string& path, const FileKind& kind);

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
