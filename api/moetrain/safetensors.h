// Minimal safetensors reader and writer (https://github.com/huggingface/safetensors format):
// 8-byte little-endian header length N, N bytes of JSON header
// {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end)}},
// then the data section. Dtypes F32, F16, BF16, I32, U8. The reader validates the whole
// header against the file size before any data is read and reports the first problem in one
// line naming the file (and the tensor).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "moetrain/dtype.h"

namespace moetrain {

// Metadata key of the per-tensor CRC32C checksums (SafetensorsWriter::add_checksums).
inline constexpr const char* kSafetensorsChecksumKey = "crc32c";

// "F32", "F16", "BF16", "I32", "U8".
const char* safetensors_dtype_name(DType t);

// Collects tensors (pointing at caller-owned data that must stay alive until write()) and
// writes them in the order added. The header lists "__metadata__" first (when non-empty),
// then the tensors in the same order, and is padded with spaces to a multiple of 8 bytes.
class SafetensorsWriter {
  public:
    // `data` holds numel(shape) * dtype_size(dtype) bytes. Throws on a duplicate name.
    void add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
             const void* data);
    void set_metadata(const std::string& key, const std::string& value);
    // Record the CRC32C of every tensor added so far in the metadata entry
    // kSafetensorsChecksumKey, {"name": "crc32c:<8 hex digits>", ...} as a JSON string.
    void add_checksums();
    // Write the file (created or truncated) and fsync it; returns the CRC32C of the file.
    uint32_t write(const std::string& path) const;
    // The header bytes (length prefix excluded, padding included) write() would produce.
    std::string header() const;

  private:
    struct Item {
        std::string name;
        DType dtype;
        std::vector<int64_t> shape;
        const void* data;
        uint64_t bytes;
    };
    std::vector<Item> items_;
    std::set<std::string> names_;  // of items_, for the duplicate check
    std::map<std::string, std::string> metadata_;
};

struct SafetensorsEntry {
    std::string name;
    DType dtype = DType::f32;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // byte range inside the data section
    int64_t numel() const;
    std::string shape_str() const;  // "[2,3]"
};

// An opened, fully validated safetensors file. Data is read on demand.
class SafetensorsFile {
  public:
    explicit SafetensorsFile(const std::string& path);

    const std::string& path() const { return path_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // Metadata value or throws "<file>: metadata has no "<key>"".
    const std::string& metadata_at(const std::string& key) const;
    const std::vector<SafetensorsEntry>& tensors() const { return tensors_; }  // by offset
    const SafetensorsEntry* find(const std::string& name) const;               // null if absent
    // Copy the raw bytes of one tensor (entry.end - entry.begin of them) to `dst`. When the
    // file carries checksums, a tensor whose bytes do not match its CRC32C throws naming it.
    void read(const SafetensorsEntry& entry, void* dst) const;
    // Does the file carry per-tensor checksums (checked when the header is read: one for
    // every tensor, none for a tensor that does not exist)?
    bool has_checksums() const { return !checksums_.empty(); }
    // An F32 tensor as floats (throws naming the tensor when absent or not F32).
    std::vector<float> read_f32(const std::string& name) const;

  private:
    std::string path_;
    uint64_t data_start_ = 0;  // 8 + header length
    std::map<std::string, std::string> metadata_;
    std::vector<SafetensorsEntry> tensors_;
    std::map<std::string, size_t> index_;
    std::map<std::string, uint32_t> checksums_;
};

}  // namespace moetrain
