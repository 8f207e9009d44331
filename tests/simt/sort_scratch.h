// The scratch of the MoE counting passes (moe_sort, moe_capacity) for the harness tests, and
// the scan they run between their kernels: the host implementation of the backend's cub wrapper
// (tests/simt/cudasim/host_cub_scan.cpp), the same interface the CUDA Device passes.
#pragma once

#include "cuda/cub_scan.h"
#include "harness_util.h"
#include "launch.h"

namespace simt_test {

inline const mtk::ExclusiveScan kScan = moetrain::cuda::exclusive_sum_i32_scan();

// The counting passes' scratch (histogram, its scan, the scan's temporaries), 256-byte aligned like
// the backend's allocations and filled with -1 so that reads of unwritten entries show.
class SortScratch {
  public:
    SortScratch(int64_t slots, int64_t E)
        : scan_bytes_(kScan.temp_bytes(mtk::moe_sort_scan_items(slots, E))),
          buf_(mtk::moe_sort_scratch_bytes(slots, E, scan_bytes_) / 4 + 64, -1) {}
    size_t scan_bytes() const { return scan_bytes_; }
    void* data() {
        auto* p = buf_.data();
        while (reinterpret_cast<uintptr_t>(p) % 256 != 0) ++p;
        return p;
    }

  private:
    size_t scan_bytes_;
    IVec buf_;
};

}  // namespace simt_test
