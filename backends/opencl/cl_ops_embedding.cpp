// Embedding lookup and gradient (kernels_cl/embedding.cl).
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::embedding_fwd_impl(const Tensor& out, const Tensor& table, const Tensor& ids,
                                  int64_t n, int64_t dim, bool accumulate) {
    if (n == 0 || dim == 0) return;
    DevPtr ptable = arg(table);
    launch("embedding", "mt_embedding_fwd", items2(dim, n), arg(out), ptable, arg(ids), cl_long{n},
           cl_long{dim}, cl_long{rows_in(table, dim)}, cl_int{accumulate}, error_word());
}

void ClDevice::embedding_bwd_impl(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                  int64_t n, int64_t dim) {
    if (n == 0 || dim == 0) return;
    DevPtr pt = arg(dtable);
    launch("embedding", "mt_embedding_bwd", items(dim, 64), pt, arg(dout), arg(ids), cl_long{n},
           cl_long{dim}, cl_long{rows_in(dtable, dim)}, error_word());
}

}  // namespace moetrain::opencl
