// The host implementation of backends/cuda/cub_sort.h (cub::DeviceRadixSort::SortPairs) for the
// SIMT harness and the cudasim module, where "device" memory is host memory and stream work goes
// through simt::submit (run at once, or recorded by the cudasim graph capture). Like cub it needs
// temporary storage, and uses all of it: the storage is overwritten with a poison pattern before
// the sort, so a caller whose scratch layout lets the temporaries overlap its keys or values gets
// a wrong sort, not a silent pass. Like cub it compares only bits [0, end_bit) of the keys.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "cuda/cub_sort.h"
#include "moetrain/error.h"
#include "simt.h"

namespace moetrain::cuda {

size_t sort_pairs_i32_temp_bytes(int64_t n, int) {
    return static_cast<size_t>(n > 0 ? n : 0) * sizeof(int32_t) + 256;
}

void sort_pairs_i32(mtk::Stream, const int32_t* keys_in, int32_t* keys_out, const int32_t* vals_in,
                    int32_t* vals_out, int64_t n, int end_bit, void* temp, size_t temp_bytes) {
    if (n <= 0) return;
    MT_CHECK(n <= INT32_MAX, "sort_pairs_i32: ", n, " items exceed int32");
    MT_CHECK(end_bit >= 1 && end_bit <= 31, "sort_pairs_i32: end_bit ", end_bit,
             " outside [1, 31]");
    MT_CHECK(temp_bytes >= sort_pairs_i32_temp_bytes(n, end_bit), "sort_pairs_i32: ", temp_bytes,
             " bytes of temporary storage, needs ", sort_pairs_i32_temp_bytes(n, end_bit));
    simt::submit([=] {  // stream work: now, or into the cudasim graph capture
        std::memset(temp, 0xa5, temp_bytes);
        auto* order = static_cast<int32_t*>(temp);  // the sorted positions, then gathered out
        const uint32_t mask = (1u << end_bit) - 1u;
        auto bits = [&](int32_t i) { return static_cast<uint32_t>(keys_in[i]) & mask; };
        std::iota(order, order + n, int32_t{0});
        std::stable_sort(order, order + n, [&](int32_t a, int32_t b) { return bits(a) < bits(b); });
        for (int64_t i = 0; i < n; ++i) {
            keys_out[i] = keys_in[order[i]];
            vals_out[i] = vals_in[order[i]];
        }
    });
}

}  // namespace moetrain::cuda
