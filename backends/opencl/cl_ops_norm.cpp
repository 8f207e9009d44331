// RMSNorm / LayerNorm forward and backward (kernels_cl/norm.cl): one work-group per row for
// the statistics and dx, chunked column sums for dg / db.
#include "cl_device.h"

namespace moetrain::opencl {
void ClDevice::rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& g,
                           int64_t rows, int64_t dim, float eps) {
    if (rows == 0) return;
    int64_t n = rows * dim;
    launch("norm", "mt_rmsnorm_fwd", reduce_groups(rows), arg(y, n, "rmsnorm_fwd: y"),
           arg(rstd, rows, "rmsnorm_fwd: rstd"), arg(x, n, "rmsnorm_fwd: x"),
           arg(g, dim, "rmsnorm_fwd: g"), cl_long{dim}, eps);
}

void ClDevice::rmsnorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& dy, const Tensor& x,
                           const Tensor& g, const Tensor& rstd, int64_t rows, int64_t dim,
                           bool accumulate_dx) {
    if (rows == 0 || dim == 0) return;
    int64_t n = rows * dim;
    DevPtr pdy = arg(dy, n, "rmsnorm_bwd: dy"), px = arg(x, n, "rmsnorm_bwd: x");
    DevPtr prstd = arg(rstd, rows, "rmsnorm_bwd: rstd");
    launch("norm", "mt_rmsnorm_bwd_dx", reduce_groups(rows), arg(dx, n, "rmsnorm_bwd: dx"), pdy,
           px, arg(g, dim, "rmsnorm_bwd: g"), prstd, cl_long{dim}, cl_int{accumulate_dx});
    ColumnPartials p = column_partials(0, rows, dim);
    launch("norm", "mt_rmsnorm_dg_partial", items2(dim, p.chunks), p.buf, pdy, px, prstd,
           cl_long{rows}, cl_long{dim}, cl_long{p.chunk_rows});
    finish_column_sums(arg(dg, dim, "rmsnorm_bwd: dg"), p, dim, true);
}

void ClDevice::layernorm_fwd(const Tensor& y, const Tensor& mean, const Tensor& rstd,
                             const Tensor& x, const Tensor& g, const Tensor& b, int64_t rows,
                             int64_t dim, float eps) {
    if (rows == 0) return;
    int64_t n = rows * dim;
    launch("norm", "mt_layernorm_fwd", reduce_groups(rows), arg(y, n, "layernorm_fwd: y"),
           arg(mean, rows, "layernorm_fwd: mean"), arg(rstd, rows, "layernorm_fwd: rstd"),
           arg(x, n, "layernorm_fwd: x"), arg(g, dim, "layernorm_fwd: g"),
           opt_arg(b, dim, "layernorm_fwd: b"), cl_int{!b.empty()}, cl_long{dim}, eps);
}

void ClDevice::layernorm_bwd(const Tensor& dx, const Tensor& dg, const Tensor& db,
                             const Tensor& dy, const Tensor& x, const Tensor& g,
                             const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t dim,
                             bool accumulate_dx) {
    if (rows == 0 || dim == 0) return;
    int64_t n = rows * dim;
    DevPtr pdy = arg(dy, n, "layernorm_bwd: dy"), px = arg(x, n, "layernorm_bwd: x");
    DevPtr pmean = arg(mean, rows, "layernorm_bwd: mean");
    DevPtr prstd = arg(rstd, rows, "layernorm_bwd: rstd");
    launch("norm", "mt_layernorm_bwd_dx", reduce_groups(rows), arg(dx, n, "layernorm_bwd: dx"),
           pdy, px, arg(g, dim, "layernorm_bwd: g"), pmean, prstd, cl_long{dim},
           cl_int{accumulate_dx});
    ColumnPartials pg = column_partials(0, rows, dim), pb = column_partials(1, rows, dim);
    bool has_b = !db.empty();
    launch("norm", "mt_layernorm_dgdb_partial", items2(dim, pg.chunks), pg.buf, pb.buf,
           cl_int{has_b}, pdy, px, pmean, prstd, cl_long{rows}, cl_long{dim},
           cl_long{pg.chunk_rows});
    finish_column_sums(arg(dg, dim, "layernorm_bwd: dg"), pg, dim, true);
    if (has_b) finish_column_sums(arg(db, dim, "layernorm_bwd: db"), pb, dim, true);
}

}  // namespace moetrain::opencl
