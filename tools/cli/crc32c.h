// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moetrain::cli {

uint32_t crc32c(const void* data, size_t n);

// TFRecord's masked form: rotate right by 15 bits, add 0xa282ead8.
inline uint32_t masked_crc32c(const void* data, size_t n) {
    const uint32_t c = crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

}  // namespace moetrain::cli
