// Reductions: sum, sum_squares and the column-sum helpers used by bias_grad and the norm
// backward passes (kernels_cl/reduce.cl). Fixed partial counts make every result
// deterministic for given sizes.
#include <algorithm>

#include "cl_device.h"

namespace moetrain::opencl {
namespace {

// Partial sums for a reduction of n elements: a fixed function of n (<= 256 groups).
int64_t partial_groups(int64_t n) {
    return std::clamp<int64_t>((n + 4095) / 4096, 1, 256);
}

}  // namespace

ClDevice::ColumnPartials ClDevice::column_partials(int slot, int64_t rows, int64_t cols) {
    int64_t chunk_rows = std::max<int64_t>(16, (rows + 255) / 256);  // <= 256 chunks
    int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    return {scratch(slot, static_cast<size_t>(chunks * cols) * sizeof(float)), chunk_rows, chunks};
}

void ClDevice::finish_column_sums(DevPtr dst, const ColumnPartials& p, int64_t cols,
                                  bool accumulate) {
    launch("reduce", "mt_colsum_finish", items(cols), dst, p.buf, cl_long{p.chunks}, cl_long{cols},
           cl_int{accumulate});
}

static void reduce_to_scalar(ClDevice& dev, DevPtr out, DevPtr x, int64_t n, float scale,
                             bool square, bool accumulate) {
    int64_t count = n > 0 ? partial_groups(n) : 0;
    DevPtr partial = dev.scratch(1, static_cast<size_t>(count) * sizeof(float));
    if (count > 0) {
        // Contiguous chunks of whole float4 quads, one per group.
        const int64_t chunk = ((n + count - 1) / count + 3) / 4 * 4;
        dev.launch("reduce", "mt_sum_partial", dev.reduce_groups(count), partial, x, cl_long{n},
                   cl_int{square}, cl_long{chunk});
    }
    dev.launch("reduce", "mt_sum_finish", dev.reduce_groups(1), out, partial, cl_long{count}, scale,
               cl_int{accumulate});
}

void ClDevice::sum_impl(const Tensor& out, const Tensor& x, int64_t n, float scale,
                        bool accumulate) {
    reduce_to_scalar(*this, arg(out), arg(x), n, scale, false, accumulate);
}

void ClDevice::sum_squares_impl(const Tensor& out, const Tensor& x, int64_t n, bool accumulate) {
    reduce_to_scalar(*this, arg(out), arg(x), n, 1.0f, true, accumulate);
}

}  // namespace moetrain::opencl
