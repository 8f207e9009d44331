// The one wrapper of cub's device-wide exclusive scan (cub::DeviceScan::ExclusiveSum) over int32:
// moe_sort and moe_capacity (kernels_cuda/moe_permute.cuh, moe_balance.cuh) run it between
// their histogram and place / admit kernels, as the mtk::ExclusiveScan the CUDA Device passes.
// Defined in cub_scan.cu (nvcc, in the kernel object library so cub's kernels go through the ptxas
// check); the SIMT harness and the cudasim test module link a host implementation of the same
// functions (tests/simt/cudasim/host_cub_scan.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_interface.h"
#include "launch.h"
#include "moetrain/error.h"

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

// What an MoE counting pass over `slots` selections of E experts (moe_sort, moe_capacity:
// kernels_cuda/expert_count.cuh) is given: the scan, its temporary bytes and the scratch bytes
// of the whole pass. Checks the kernels' limits, naming `op`; call with the device current.
struct CountingScan {
    mtk::ExclusiveScan scan;
    size_t temp_bytes, scratch_bytes;
};
inline CountingScan counting_scan(const char* op, int64_t slots, int64_t E) {
    MT_CHECK(E <= mtk::kMaxExperts, op, ": n_experts ", E, " > ", mtk::kMaxExperts,
             " (the CUDA sort kernels' limit)");
    MT_CHECK(slots <= INT32_MAX, op, ": ", slots, " slots exceed int32 row indices");
    const mtk::ExclusiveScan scan = exclusive_sum_i32_scan();
    const size_t temp = scan.temp_bytes(mtk::moe_sort_scan_items(slots, E));
    return {scan, temp, mtk::moe_sort_scratch_bytes(slots, E, temp)};
}

}  // namespace moetrain::cuda
