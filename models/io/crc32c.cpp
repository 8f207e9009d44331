// CRC32C: hardware path (x86-64 SSE4.2 crc32 on 8 bytes at a time) chosen once at run time,
// byte-wise table path elsewhere.
#include "io/crc32c.h"

#include <array>
#include <cstdio>
#include <cstring>

namespace moetrain::io {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
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

uint32_t crc_table(const unsigned char* p, size_t n, uint32_t c) {
    for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc_hw(const unsigned char* p, size_t n, uint32_t c) {
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
    }
    uint32_t c32 = static_cast<uint32_t>(c64);
    for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32;
}
const bool kHaveHw = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
    const auto* p = static_cast<const unsigned char*>(data);
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (kHaveHw) return ~crc_hw(p, bytes, c);
#endif
    return ~crc_table(p, bytes, c);
}

std::string crc32c_text(uint32_t crc) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "crc32c:%08x", crc);
    return buf;
}

uint32_t parse_crc32c_text(const std::string& text) {
    uint32_t v = 0;
    if (text.size() != 15 || text.compare(0, 7, "crc32c:") != 0) return 0;
    for (size_t i = 7; i < 15; ++i) {
        const char c = text[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | static_cast<uint32_t>(d);
    }
    return v;
}

}  // namespace moetrain::io
