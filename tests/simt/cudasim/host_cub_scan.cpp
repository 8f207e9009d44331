// The host implementation of backends/cuda/cub_scan.h (cub::DeviceScan::ExclusiveSum) for the
// SIMT harness and the cudasim module, where "device" memory is host memory and stream work
// goes through simt::submit (run at once, or recorded by the cudasim graph capture). Like cub it
// needs temporary storage, and uses all of it: the storage is overwritten with a poison pattern
// before the scan, so a caller whose scratch layout lets the temporaries overlap the histogram or
// its scan gets a wrong sort, not a silent pass.
#include <cstring>

#include "cuda/cub_scan.h"
#include "moetrain/error.h"
#include "simt.h"

namespace moetrain::cuda {

size_t exclusive_sum_i32_temp_bytes(int64_t n) {
    return static_cast<size_t>(n > 0 ? n : 0) * sizeof(int32_t) + 256;
}

void exclusive_sum_i32(mtk::Stream, const int32_t* in, int32_t* out, int64_t n, void* temp,
                       size_t temp_bytes) {
    if (n <= 0) return;
    MT_CHECK(temp_bytes >= exclusive_sum_i32_temp_bytes(n), "exclusive_sum_i32: ", temp_bytes,
             " bytes of temporary storage, needs ", exclusive_sum_i32_temp_bytes(n));
    simt::submit([=] {  // stream work: now, or into the cudasim graph capture
        std::memset(temp, 0xa5, temp_bytes);
        auto* partial = static_cast<int32_t*>(temp);  // the running sums, then copied out
        int32_t running = 0;
        for (int64_t i = 0; i < n; ++i) {
            partial[i] = running;
            running += in[i];
        }
        std::memcpy(out, partial, static_cast<size_t>(n) * sizeof(int32_t));
    });
}

}  // namespace moetrain::cuda
