// MoE token permutation: stable counting sort by expert (selections dropped by capacity
// skipped), row gather, weighted combine and its backward (kernels_cl/moe_permute.cl).
#include <algorithm>

#include "cl_device.h"

namespace moetrain::opencl {
namespace {
constexpr int64_t kSortChunk = 256;  // slots per counting-sort chunk
}

void ClDevice::moe_sort_impl(const Tensor& counts, const Tensor& row_token, const Tensor& slot_row,
                             const Tensor& topk_idx, int64_t N, int64_t k, int64_t E) {
    MT_CHECK(E > 0 && E <= 65536, "moe_sort: n_experts ", E, " out of range");
    int64_t slots = N * k;
    DevPtr pcounts = arg(counts);
    DevPtr prt = arg(row_token);
    DevPtr psr = arg(slot_row);
    DevPtr pidx = arg(topk_idx);
    int64_t chunks = std::max<int64_t>(1, (slots + kSortChunk - 1) / kSortChunk);
    DevPtr hist = scratch(0, static_cast<size_t>(chunks * E) * sizeof(cl_int));
    cl_int e32 = static_cast<cl_int>(E);
    launch("moe_permute", "mt_moe_count", items2(E, chunks, 64), hist, pidx, cl_long{slots},
           cl_long{kSortChunk}, e32, error_word());
    launch("moe_permute", "mt_moe_offsets", reduce_groups(1), pcounts, hist, cl_long{chunks}, e32,
           prt, cl_long{slots}, LocalBytes{static_cast<size_t>(E + 1) * sizeof(cl_int)});
    launch("moe_permute", "mt_moe_scatter", items2(E, chunks, 64), prt, psr, hist, pidx,
           cl_long{slots}, cl_long{kSortChunk}, e32, static_cast<cl_int>(k));
    check_device_error();  // a bad expert index must fail here (the caller reads counts next)
}

void ClDevice::gather_rows_impl(const Tensor& dst, const Tensor& src, const Tensor& index,
                                int64_t R, int64_t dim) {
    if (R == 0 || dim == 0) return;
    DevPtr psrc = arg(src);
    launch("moe_permute", "mt_gather_rows", items2(dim, R), arg(dst), psrc, arg(index), cl_long{R},
           cl_long{dim}, cl_long{rows_in(src, dim)}, error_word());
}

void ClDevice::moe_combine_impl(const Tensor& y, const Tensor& rows, const Tensor& slot_row,
                                const Tensor& w, int64_t N, int64_t k, int64_t dim,
                                bool accumulate) {
    if (N == 0 || dim == 0) return;
    launch("moe_permute", "mt_moe_combine", items2(dim, N), arg(y), arg(rows), arg(slot_row),
           arg(w), cl_int{!w.empty()}, cl_long{N}, static_cast<cl_int>(k), cl_long{dim},
           cl_int{accumulate}, error_word());
}

void ClDevice::moe_combine_bwd_impl(const Tensor& drows, const Tensor& dw, const Tensor& dy,
                                    const Tensor& rows, const Tensor& slot_row, const Tensor& w,
                                    int64_t N, int64_t k, int64_t dim) {
    int64_t slots = N * k;
    if (slots == 0) return;
    DevPtr pdy = arg(dy);
    DevPtr psr = arg(slot_row);
    cl_int k32 = static_cast<cl_int>(k);
    if (dim > 0)
        launch("moe_permute", "mt_moe_combine_bwd_rows", items2(dim, slots), arg(drows), pdy, psr,
               arg(w), cl_int{!w.empty()}, cl_long{slots}, k32, cl_long{dim}, error_word());
    if (!dw.empty())
        launch("moe_permute", "mt_moe_combine_bwd_w", items(slots, 64), arg(dw), pdy, arg(rows),
               psr, cl_long{slots}, k32, cl_long{dim});
}

}  // namespace moetrain::opencl
