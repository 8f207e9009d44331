// CRC32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78), the checksum of every
// checkpoint tensor and file: the SSE4.2 crc32 instruction where the CPU has it (several
// GB/s), a table otherwise; both give the same values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace moetrain::io {

// CRC32C of `bytes` bytes, continuing from `crc` (the CRC32C of what came before; 0 to start).
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

// "crc32c:" followed by 8 lowercase hex digits, the form checkpoints store.
std::string crc32c_text(uint32_t crc);
// The value of a crc32c_text() string; callers compare crc32c_text(result) with the input to
// reject anything else (e.g. upper-case digits, which would make two spellings of one value).
uint32_t parse_crc32c_text(const std::string& text);

}  // namespace moetrain::io
