// The one wrapper of cub's device-wide exclusive scan (cub::DeviceScan::ExclusiveSum) over int32:
// moe_sort (kernels_cuda/moe_permute.cuh) runs it between its count and place kernels, as the
// mtk::ExclusiveScan the CUDA Device passes. Defined in cub_scan.cu (nvcc, in the kernel
// object library so cub's kernels go through the ptxas check); the SIMT harness and the cudasim
// test module link a host implementation of the same functions
// (tests/simt/cudasim/host_cub_scan.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_interface.h"

namespace moetrain::cuda {

// Bytes of device temporary storage exclusive_sum_i32 needs for n items on the current device:
// asked from cub once per (device, n) and remembered, so a training step repeats no query.
size_t exclusive_sum_i32_temp_bytes(int64_t n);

// out[i] = in[0] + ... + in[i-1] for i < n, queued on s (no host synchronisation, no
// allocation: capturable). temp holds temp_bytes >= exclusive_sum_i32_temp_bytes(n) bytes of
// device memory overlapping neither in nor out. Throws moetrain::Error when cub reports one.
void exclusive_sum_i32(mtk::Stream s, const int32_t* in, int32_t* out, int64_t n, void* temp,
                       size_t temp_bytes);

// Both, as moe_sort takes them.
inline mtk::ExclusiveScan exclusive_sum_i32_scan() {
    return {exclusive_sum_i32_temp_bytes, exclusive_sum_i32};
}

}  // namespace moetrain::cuda
