// The llm.c shard header: parsing (the fuzzable entry point) and writing.
#include <cstring>
#include <string_view>

#include "io/file.h"
#include "moetrain/error.h"
#include "moetrain/shards.h"

namespace moetrain {
namespace {

constexpr int32_t kMagic16 = 20240520, kVersion16 = 1;
constexpr int32_t kMagic32 = 20240801, kVersion32 = 7;

// The little-endian int32 at byte `at` of `bytes` (which holds at least at + 4 bytes).
int32_t le32(std::string_view bytes, size_t at) {
    uint32_t v = 0;
    for (size_t i = 4; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
    return static_cast<int32_t>(v);
}

void put32(std::string& s, size_t at, int32_t value) {
    auto v = static_cast<uint32_t>(value);
    for (int i = 0; i < 4; ++i)
        s[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

}  // namespace

ShardHeader parse_shard_header(std::string_view bytes, uint64_t file_size,
                               const std::string& name) {
    MT_CHECK(bytes.size() >= static_cast<size_t>(kShardHeaderBytes) &&
                 file_size >= static_cast<uint64_t>(kShardHeaderBytes),
             "shard ", name, ": truncated header (", std::min<uint64_t>(file_size, bytes.size()),
             " of ", kShardHeaderBytes, " bytes)");
    const int32_t magic = le32(bytes, 0), version = le32(bytes, 4), count = le32(bytes, 8);
    ShardHeader h;
    if (magic == kMagic16) {
        MT_CHECK(version == kVersion16, "shard ", name, ": version ", version, " with magic ",
                 magic, " (expected ", kVersion16, ")");
        h.token_bytes = 2;
    } else if (magic == kMagic32) {
        MT_CHECK(version == kVersion32, "shard ", name, ": version ", version, " with magic ",
                 magic, " (expected ", kVersion32, ")");
        h.token_bytes = 4;
    } else {
        fail("shard ", name, ": bad magic ", magic, " (expected ", kMagic16, " or ", kMagic32, ")");
    }
    MT_CHECK(count >= 0, "shard ", name, ": negative token count ", count);
    h.tokens = count;
    const uint64_t want = static_cast<uint64_t>(kShardHeaderBytes) +
                          static_cast<uint64_t>(count) * static_cast<uint64_t>(h.token_bytes);
    MT_CHECK(file_size >= want, "shard ", name, ": truncated: the header says ", count, " tokens (",
             want, " bytes) but the file has ", file_size, " bytes");
    MT_CHECK(file_size == want, "shard ", name, ": ", file_size - want, " bytes after the ", count,
             " tokens the header announces");
    return h;
}

std::string shard_header_bytes(int token_bytes, int64_t tokens) {
    MT_CHECK(token_bytes == 2 || token_bytes == 4, "shard token width must be 2 or 4 bytes");
    MT_CHECK(tokens >= 0 && tokens <= INT32_MAX, "a shard holds at most ", INT32_MAX,
             " tokens (llm.c's int32 count), not ", tokens);
    std::string h(static_cast<size_t>(kShardHeaderBytes), '\0');
    put32(h, 0, token_bytes == 2 ? kMagic16 : kMagic32);
    put32(h, 4, token_bytes == 2 ? kVersion16 : kVersion32);
    put32(h, 8, static_cast<int32_t>(tokens));
    return h;
}

int shard_token_bytes(int64_t vocab_size) {
    return vocab_size <= 65536 ? 2 : 4;
}

bool is_shard_file(const std::string& path) {
    const io::InputFile in(path, io::kDataFile);
    if (in.size() < 4) return false;
    char b[4];
    in.read_at(0, b, sizeof b);
    int32_t magic = le32(std::string_view(b, sizeof b), 0);
    return magic == kMagic16 || magic == kMagic32;
}

}  // namespace moetrain
