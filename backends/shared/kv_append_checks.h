// The host-side argument rules of Device::kv_append (api/moetrain/device.h) shared by every
// backend: sizes non-negative, the host part of the rows inside the capacity, one dtype for
// cache and rows. One check, one error message, on every backend.
#pragma once

#include <cstdint>

#include "moetrain/device.h"
#include "moetrain/error.h"

namespace moetrain {

inline void check_kv_append(const Tensor& cache, const Tensor& rows, int64_t B, int64_t T,
                            int64_t S, int64_t row_len, int64_t pos0) {
    MT_CHECK(B >= 0 && T >= 0 && S >= 0 && row_len >= 0 && pos0 >= 0, "kv_append: negative size (B ",
             B, ", T ", T, ", S ", S, ", row_len ", row_len, ", pos0 ", pos0, ")");
    MT_CHECK(pos0 + T <= S, "kv_append: rows ", pos0, "..", pos0 + T - 1, " exceed the capacity ",
             S);
    MT_CHECK(cache.dtype == rows.dtype, "kv_append: dtype mismatch (cache ",
             dtype_name(cache.dtype), ", rows ", dtype_name(rows.dtype), ")");
}

}  // namespace moetrain
