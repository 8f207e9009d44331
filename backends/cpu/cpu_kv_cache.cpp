// CPU KV-cache append (device.h kv_append): the B row blocks of T new rows are copied into
// the cache at row p = pos0 + pos_dev[0] of each sequence, any dtype (plain byte copies).
#include <cstring>

#include "cpu/cpu_device.h"

namespace moetrain {

void CpuDevice::kv_append_impl(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T,
                               int64_t S, int64_t row_len, int64_t pos0, const Tensor& pos_dev) {
    const char* op = "kv_append";
    char* dst = static_cast<char*>(raw(cache));
    const char* src = static_cast<const char*>(raw(rows));
    const int64_t offset = device_value(pos_dev), p = pos0 + offset;
    MT_CHECK(p >= 0 && p + T <= S, op, ": device position offset ", offset, " puts rows ", p, "..",
             p + T - 1, " outside the capacity ", S);
    if (B * T * row_len == 0) return;
    const size_t es = dtype_size(cache.dtype), block = static_cast<size_t>(T * row_len) * es;
    for (int64_t b = 0; b < B; ++b)
        std::memcpy(dst + static_cast<size_t>((b * S + p) * row_len) * es,
                    src + static_cast<size_t>(b) * block, block);
}

}  // namespace moetrain
