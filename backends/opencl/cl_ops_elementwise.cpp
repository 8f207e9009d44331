// Element-wise dense algebra ops: add, axpby, add_bias, bias_grad (kernels_cl/elementwise.cl).
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::add_impl(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) {
    if (n == 0) return;
    launch("elementwise", "mt_add", items(n), arg(out), arg(a), arg(b), cl_long{n});
}

void ClDevice::axpby_impl(const Tensor& y, float alpha, const Tensor& x, float beta, int64_t n) {
    if (n == 0) return;
    launch("elementwise", "mt_axpby", items(n), arg(y), alpha, arg(x), beta, cl_long{n});
}

void ClDevice::add_bias_impl(const Tensor& y, const Tensor& bias, int64_t rows, int64_t cols) {
    if (rows == 0 || cols == 0) return;
    launch("elementwise", "mt_add_bias", items2(cols, rows), arg(y), arg(bias), cl_long{rows},
           cl_long{cols});
}

void ClDevice::bias_grad_impl(const Tensor& dbias, const Tensor& dy, int64_t rows, int64_t cols) {
    if (cols == 0) return;
    DevPtr db = arg(dbias);
    if (rows == 0) return;
    DevPtr d = arg(dy);
    ColumnPartials p = column_partials(0, rows, cols);
    launch("reduce", "mt_colsum_partial", items2(cols, p.chunks), p.buf, d, cl_long{rows},
           cl_long{cols}, cl_long{p.chunk_rows}, float_code(dy.dtype));
    finish_column_sums(db, p, cols, true);
}

}  // namespace moetrain::opencl
