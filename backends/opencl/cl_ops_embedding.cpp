// Embedding lookup and gradient (kernels_cl/embedding.cl).
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids,
                             int64_t n, int64_t dim, bool accumulate) {
    if (n == 0 || dim == 0) return;
    DevPtr ptable = arg(table, dim, "embedding_fwd: table");
    launch("embedding", "mt_embedding_fwd", items2(dim, n), arg(out, n * dim, "embedding_fwd: out"),
           ptable, arg(ids, n, "embedding_fwd: ids", DType::i32), cl_long{n}, cl_long{dim},
           cl_long{rows_in(table, dim)}, cl_int{accumulate}, error_word());
}

void ClDevice::embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                             int64_t n, int64_t dim) {
    if (n == 0 || dim == 0) return;
    DevPtr pt = arg(dtable, dim, "embedding_bwd: dtable");
    launch("embedding", "mt_embedding_bwd", items(dim, 64), pt,
           arg(dout, n * dim, "embedding_bwd: dout"), arg(ids, n, "embedding_bwd: ids", DType::i32),
           cl_long{n}, cl_long{dim}, cl_long{rows_in(dtable, dim)}, error_word());
}

}  // namespace moetrain::opencl
