// CpuDevice::gemm_grouped: the group sizes are host memory, so the grouped product is one
// CpuDevice::gemm per group (backends/shared/grouped_gemm.h), each with gemm's own GEMM
// library call, 16-bit operand packing and OpenMP parallelism; the groups run one after another.
#include "cpu/cpu_device.h"
#include "shared/grouped_gemm.h"

namespace moetrain {

void CpuDevice::gemm_grouped_impl(const GemmArgs& g, const Tensor& group_rows, int64_t groups,
                                  GroupDim dim) {
    const int32_t* rows = i32(group_rows);
    run_grouped_on_host(g, rows, groups, dim, [&](const GemmArgs& e) { gemm(e); });
}

}  // namespace moetrain
