// The one wrapper of cub's device-wide radix sort (cub::DeviceRadixSort::SortPairs) over int32
// keys and values: embedding_bwd (kernels_cuda/embedding.cuh) sorts its token indices by id with
// it, as the mtk::RadixSortPairs the CUDA Device passes. Defined in cub_sort.cu (nvcc, in the
// kernel object library so cub's kernels go through the ptxas check); the SIMT harness and the
// cudasim test module link a host implementation of the same functions
// (tests/simt/cudasim/host_cub_sort.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_interface.h"

namespace moetrain::cuda {

// Bytes of device temporary storage sort_pairs_i32 needs for n pairs compared on end_bit key
// bits, on the current device: asked from cub once per (device, n, end_bit) and remembered, so a
// training step repeats no query.
size_t sort_pairs_i32_temp_bytes(int64_t n, int end_bit);

// Stable sort of n (key, value) pairs by bits [0, end_bit) of the non-negative keys, queued on s
// (no host synchronisation, no allocation: capturable); n <= INT32_MAX. temp holds temp_bytes >=
// sort_pairs_i32_temp_bytes(n, end_bit) bytes of device memory overlapping none of the arrays.
// Throws moetrain::Error when cub reports one.
void sort_pairs_i32(mtk::Stream s, const int32_t* keys_in, int32_t* keys_out,
                    const int32_t* vals_in, int32_t* vals_out, int64_t n, int end_bit, void* temp,
                    size_t temp_bytes);

// Both, as embedding_bwd takes them.
inline mtk::RadixSortPairs radix_sort_pairs_i32() {
    return {sort_pairs_i32_temp_bytes, sort_pairs_i32};
}

}  // namespace moetrain::cuda
