// Table-driven CRC-32C. Debian 12 has no package of Google's crc32c library, and event files
// are small, so a byte-at-a-time table is fast enough.
#include "crc32c.h"

#include <array>

namespace moetrain::cli {

namespace {
constexpr std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        t[i] = c;
    }
    return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();
// The check value of the CRC-32C catalogue: crc32c("123456789") = 0xE3069283.
constexpr uint32_t check() {
    uint32_t c = 0xFFFFFFFFu;
    for (char ch : {'1', '2', '3', '4', '5', '6', '7', '8', '9'})
        c = kTable[(c ^ static_cast<uint8_t>(ch)) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}
static_assert(check() == 0xE3069283u, "CRC-32C table");
}  // namespace

uint32_t crc32c(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

}  // namespace moetrain::cli
