// cub::DeviceScan::ExclusiveSum over int32 (see cub_scan.h): the temp-storage size query is
// cached per (device, n); the scan itself only queues cub's kernels on the stream.
#include <cub/device/device_scan.cuh>

#include <map>
#include <mutex>
#include <utility>

#include "cub_scan.h"
#include "cuda/cuda_errors.h"

namespace moetrain::cuda {

size_t exclusive_sum_i32_temp_bytes(int64_t n) {
    static std::mutex mu;
    static std::map<std::pair<int, int64_t>, size_t> known;  // (device, n) -> bytes
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    std::lock_guard<std::mutex> lock(mu);
    auto it = known.find({device, n});
    if (it != known.end()) return it->second;
    size_t bytes = 0;
    check_cuda(cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), n),
               "cub::DeviceScan::ExclusiveSum (temporary storage size)");
    known.emplace(std::make_pair(device, n), bytes);
    return bytes;
}

void exclusive_sum_i32(mtk::Stream s, const int32_t* in, int32_t* out, int64_t n, void* temp,
                       size_t temp_bytes) {
    if (n <= 0) return;
    check_cuda(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, in, out, n, s),
               "cub::DeviceScan::ExclusiveSum");
}

}  // namespace moetrain::cuda
