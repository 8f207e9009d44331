// RMSNorm / LayerNorm forward and backward (kernels_cl/norm.cl): one work-group per row for
// the statistics and dx, chunked column sums for dg / db.
#include "cl_device.h"

namespace moetrain::opencl {
void ClDevice::rmsnorm_fwd_impl(const Tensor& y, const Tensor& rstd, const Tensor& x,
                                const Tensor& g, int64_t rows, int64_t dim, float eps) {
    if (rows == 0) return;
    launch("norm", "mt_rmsnorm_fwd", reduce_groups(rows), arg(y), arg(rstd), arg(x), arg(g),
           cl_long{dim}, eps, float_code(y.dtype));
}

void ClDevice::rmsnorm_bwd_impl(const Tensor& dx, const Tensor& dg, const Tensor& dy,
                                const Tensor& x, const Tensor& g, const Tensor& rstd, int64_t rows,
                                int64_t dim, bool accumulate_dx) {
    if (rows == 0 || dim == 0) return;
    DevPtr pdy = arg(dy), px = arg(x);
    DevPtr prstd = arg(rstd);
    launch("norm", "mt_rmsnorm_bwd_dx", reduce_groups(rows), arg(dx), pdy, px, arg(g), prstd,
           cl_long{dim}, cl_int{accumulate_dx});
    ColumnPartials p = column_partials(0, rows, dim);
    launch("norm", "mt_rmsnorm_dg_partial", items2(dim, p.chunks), p.buf, pdy, px, prstd,
           cl_long{rows}, cl_long{dim}, cl_long{p.chunk_rows});
    finish_column_sums(arg(dg), p, dim, true);
}

void ClDevice::layernorm_fwd_impl(const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                  const Tensor& x, const Tensor& g, const Tensor& b, int64_t rows,
                                  int64_t dim, float eps) {
    if (rows == 0) return;
    launch("norm", "mt_layernorm_fwd", reduce_groups(rows), arg(y), arg(mean), arg(rstd), arg(x),
           arg(g), arg(b), cl_int{!b.empty()}, cl_long{dim}, eps, float_code(y.dtype));
}

void ClDevice::layernorm_bwd_impl(const Tensor& dx, const Tensor& dg, const Tensor& db,
                                  const Tensor& dy, const Tensor& x, const Tensor& g,
                                  const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t dim,
                                  bool accumulate_dx) {
    if (rows == 0 || dim == 0) return;
    DevPtr pdy = arg(dy), px = arg(x);
    DevPtr pmean = arg(mean);
    DevPtr prstd = arg(rstd);
    launch("norm", "mt_layernorm_bwd_dx", reduce_groups(rows), arg(dx), pdy, px, arg(g), pmean,
           prstd, cl_long{dim}, cl_int{accumulate_dx});
    ColumnPartials pg = column_partials(0, rows, dim), pb = column_partials(1, rows, dim);
    bool has_b = !db.empty();
    launch("norm", "mt_layernorm_dgdb_partial", items2(dim, pg.chunks), pg.buf, pb.buf,
           cl_int{has_b}, pdy, px, pmean, prstd, cl_long{rows}, cl_long{dim},
           cl_long{pg.chunk_rows});
    finish_column_sums(arg(dg), pg, dim, true);
    if (has_b) finish_column_sums(arg(db), pb, dim, true);
}

}  // namespace moetrain::opencl
