// cub::DeviceRadixSort::SortPairs over int32 keys and values (see cub_sort.h): the temp-storage
// size query is cached per (device, n, end_bit); the sort itself only queues cub's kernels on the
// stream.
#include <cub/device/device_radix_sort.cuh>

#include <map>
#include <mutex>
#include <tuple>

#include "cub_sort.h"
#include "cuda/cuda_errors.h"
#include "moetrain/error.h"

namespace moetrain::cuda {

size_t sort_pairs_i32_temp_bytes(int64_t n, int end_bit) {
    MT_CHECK(n >= 0 && n <= INT32_MAX, "sort_pairs_i32: ", n, " items exceed int32");
    static std::mutex mu;
    static std::map<std::tuple<int, int64_t, int>, size_t> known;  // (device, n, bits) -> bytes
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    std::lock_guard<std::mutex> lock(mu);
    auto it = known.find({device, n, end_bit});
    if (it != known.end()) return it->second;
    size_t bytes = 0;
    check_cuda(cub::DeviceRadixSort::SortPairs(
                   nullptr, bytes, static_cast<const int32_t*>(nullptr),
                   static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                   static_cast<int32_t*>(nullptr), static_cast<int>(n), 0, end_bit),
               "cub::DeviceRadixSort::SortPairs (temporary storage size)");
    known.emplace(std::make_tuple(device, n, end_bit), bytes);
    return bytes;
}

void sort_pairs_i32(mtk::Stream s, const int32_t* keys_in, int32_t* keys_out,
                    const int32_t* vals_in, int32_t* vals_out, int64_t n, int end_bit, void* temp,
                    size_t temp_bytes) {
    if (n <= 0) return;
    MT_CHECK(n <= INT32_MAX, "sort_pairs_i32: ", n, " items exceed int32");
    check_cuda(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, vals_in,
                                               vals_out, static_cast<int>(n), 0, end_bit, s),
               "cub::DeviceRadixSort::SortPairs");
}

}  // namespace moetrain::cuda
