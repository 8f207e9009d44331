// The grouped CUTLASS kernels when the build has none (no CUTLASS headers, no sm_90 target, or
// the cudasim test module): gemm_grouped runs its cuBLAS tiling, and says so (gemm_grouped_kernel).
#include "cuda/cutlass_grouped.h"
#include "moetrain/error.h"

namespace moetrain::cuda {

bool cutlass_grouped_built() {
    return false;
}

bool cutlass_grouped_supports(Trans, Trans, DType, int64_t, int64_t, int64_t) {
    return false;
}

size_t cutlass_grouped_scratch(Trans, Trans, DType, int64_t, int) {
    return 0;
}

void cutlass_grouped_run(const CutlassGroupedCall&) {
    fail("gemm_grouped: this build has no CUTLASS grouped kernels");
}

}  // namespace moetrain::cuda
