// KV-cache append (moetrain::Device::kv_append): cache[b, p + t, :] = rows[b, t, :] with
// p = pos0 + pos_dev[0] (pos_dev: the device-side offset, or nullptr), for elements of 1, 2 or
// 4 bytes. A grid-stride loop over the B*T*row_len new elements with the elementwise()
// geometry, so the launch does not depend on the device value; a p that puts the rows outside
// the capacity S is reported (kErrKvAppendPosition) and nothing is written.
#pragma once

#include "common.cuh"

namespace mtk {

template <typename E>
__global__ void kv_append_kernel(E* __restrict__ cache, const E* __restrict__ rows, int64_t T,
                                 int64_t S, int64_t row_len, int64_t pos0,
                                 const int32_t* __restrict__ pos_dev, int64_t n, int32_t* err) {
    const int64_t offset = pos_dev ? *pos_dev : 0, p = pos0 + offset;
    if (p < 0 || p + T > S) {
        if (global_thread() == 0)
            report_error(err, kErrKvAppendPosition, static_cast<int32_t>(offset));
        return;
    }
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        const int64_t c = i % row_len, bt = i / row_len, t = bt % T, b = bt / T;
        cache[(b * S + p + t) * row_len + c] = rows[i];
    }
}

// cache[b, pos0 + pos_dev[0] + t, :] = rows[b, t, :], elements of 1, 2 or 4 bytes (pos_dev
// may be nullptr).
void kv_append(Stream s, void* cache, const void* rows, int elem_bytes, int64_t B, int64_t T,
               int64_t S, int64_t row_len, int64_t pos0, const int32_t* pos_dev, int32_t* err) {
    const int64_t n = B * T * row_len;
    if (n <= 0) return;
    const Geom g = elementwise(n);
    if (elem_bytes == 4)
        MT_LAUNCH(kv_append_kernel<uint32_t>, g, s, static_cast<uint32_t*>(cache),
                  static_cast<const uint32_t*>(rows), T, S, row_len, pos0, pos_dev, n, err);
    else if (elem_bytes == 2)
        MT_LAUNCH(kv_append_kernel<uint16_t>, g, s, static_cast<uint16_t*>(cache),
                  static_cast<const uint16_t*>(rows), T, S, row_len, pos0, pos_dev, n, err);
    else
        MT_LAUNCH(kv_append_kernel<uint8_t>, g, s, static_cast<uint8_t*>(cache),
                  static_cast<const uint8_t*>(rows), T, S, row_len, pos0, pos_dev, n, err);
}

}  // namespace mtk
