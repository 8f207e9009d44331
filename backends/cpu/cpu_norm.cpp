// CPU rmsnorm / layernorm forward and backward (MODEL.md 2). Row statistics are accumulated in
// double over the fixed lanes of cpu_simd.h, one row per iteration; a 16-bit y is each row's
// f32 values rounded (cpu_float_out.h). The backward makes one
// sweep over x and dy: each fixed chunk of rows writes its dx rows and its partial gain /
// bias gradients, summed over the chunks in order (cpu_parallel.h): deterministic.
#include <cmath>

#include "cpu/cpu_device.h"
#include "cpu/cpu_float_out.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_simd.h"

namespace moetrain {

void CpuDevice::rmsnorm_fwd_impl(const Tensor& y, const Tensor& rstd, const Tensor& x,
                                 const Tensor& g, int64_t rows, int64_t dim, float eps) {
    const auto [prs, px, pg] = f32s(rstd, x, g);
    const cpu::RowsOut out(raw(y), y.dtype, dim);
#pragma omp parallel for schedule(static) if (rows * dim > cpu::kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = px + r * dim;
        const double ms = cpu::lane_sum<double>(
            dim, [&](int64_t c) { return static_cast<double>(xr[c]) * xr[c]; });
        const float rs = static_cast<float>(1.0 / std::sqrt(ms / static_cast<double>(dim) + eps));
        prs[r] = rs;
        float* yr = out.at(r);
#pragma omp simd
        for (int64_t c = 0; c < dim; ++c) yr[c] = xr[c] * rs * pg[c];
        out.done(r, yr);
    }
}

void CpuDevice::rmsnorm_bwd_impl(const Tensor& dx, const Tensor& dg, const Tensor& dy,
                                 const Tensor& x, const Tensor& g, const Tensor& rstd, int64_t rows,
                                 int64_t dim, bool accumulate_dx) {
    const auto [pdx, pdg, pdy, px, pg, prs] = f32s(dx, dg, dy, x, g, rstd);
    double* partials = scratch_f64(cpu::row_chunks(rows) * dim);
    cpu::rows_with_column_sums(
        rows, dim, partials,
        [&](int64_t r0, int64_t r1, double* acc) {
            for (int64_t r = r0; r < r1; ++r) {
                const float* xr = px + r * dim;
                const float* dyr = pdy + r * dim;
                const float rs = prs[r];
                const double dot = cpu::lane_sum<double>(  // sum_c dy_c g_c x_c
                    dim, [&](int64_t c) { return static_cast<double>(dyr[c]) * pg[c] * xr[c]; });
                const float coef =
                    static_cast<float>(dot * rs * rs * rs / static_cast<double>(dim));
                for (int64_t c = 0; c < dim; ++c)
                    acc[c] += static_cast<double>(dyr[c]) * xr[c] * rs;
                float* dxr = pdx + r * dim;
                if (accumulate_dx) {
#pragma omp simd
                    for (int64_t c = 0; c < dim; ++c) dxr[c] += rs * pg[c] * dyr[c] - xr[c] * coef;
                } else {
#pragma omp simd
                    for (int64_t c = 0; c < dim; ++c) dxr[c] = rs * pg[c] * dyr[c] - xr[c] * coef;
                }
            }
        },
        [&](int64_t c, double total) { pdg[c] += static_cast<float>(total); });
}

void CpuDevice::layernorm_fwd_impl(const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& x, const Tensor& g, const Tensor& b, int64_t rows,
                                   int64_t dim, float eps) {
    const auto [pmu, prs, px, pg, pb] = f32s(mean, rstd, x, g, b);
    const cpu::RowsOut out(raw(y), y.dtype, dim);
    const double nd = static_cast<double>(dim);
#pragma omp parallel for schedule(static) if (rows * dim > cpu::kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = px + r * dim;
        const double mu =
            cpu::lane_sum<double>(dim, [&](int64_t c) { return static_cast<double>(xr[c]); }) / nd;
        const double var = cpu::lane_sum<double>(dim, [&](int64_t c) {
            const double dev = xr[c] - mu;
            return dev * dev;
        });
        const float m = static_cast<float>(mu);
        const float rs = static_cast<float>(1.0 / std::sqrt(var / nd + eps));
        pmu[r] = m;
        prs[r] = rs;
        float* yr = out.at(r);
        if (pb) {
#pragma omp simd
            for (int64_t c = 0; c < dim; ++c) yr[c] = (xr[c] - m) * rs * pg[c] + pb[c];
        } else {
#pragma omp simd
            for (int64_t c = 0; c < dim; ++c) yr[c] = (xr[c] - m) * rs * pg[c];
        }
        out.done(r, yr);
    }
}

void CpuDevice::layernorm_bwd_impl(const Tensor& dx, const Tensor& dg, const Tensor& db,
                                   const Tensor& dy, const Tensor& x, const Tensor& g,
                                   const Tensor& mean, const Tensor& rstd, int64_t rows,
                                   int64_t dim, bool accumulate_dx) {
    const auto [pdx, pdg, pdb, pdy, px, pg, pmu, prs] = f32s(dx, dg, db, dy, x, g, mean, rstd);
    const double nd = static_cast<double>(dim);
    double* partials = scratch_f64(cpu::row_chunks(rows) * 2 * dim);  // per chunk: dg, then db
    cpu::rows_with_column_sums(
        rows, 2 * dim, partials,
        [&](int64_t r0, int64_t r1, double* acc) {
            for (int64_t r = r0; r < r1; ++r) {
                const float* xr = px + r * dim;
                const float* dyr = pdy + r * dim;
                const float m = pmu[r], rs = prs[r];
                // Sums of dxhat and dxhat * xhat.
                const double s1 = cpu::lane_sum<double>(
                    dim, [&](int64_t c) { return static_cast<double>(dyr[c]) * pg[c]; });
                const double s2 = cpu::lane_sum<double>(dim, [&](int64_t c) {
                    return static_cast<double>(dyr[c]) * pg[c] * ((xr[c] - m) * rs);
                });
                const float mean_dxh = static_cast<float>(s1 / nd);
                const float mean_dxh_xh = static_cast<float>(s2 / nd);
                for (int64_t c = 0; c < dim; ++c) {
                    acc[c] += static_cast<double>(dyr[c]) * ((xr[c] - m) * rs);
                    acc[dim + c] += dyr[c];
                }
                float* dxr = pdx + r * dim;
                if (accumulate_dx) {
#pragma omp simd
                    for (int64_t c = 0; c < dim; ++c)
                        dxr[c] += rs * (dyr[c] * pg[c] - mean_dxh - (xr[c] - m) * rs * mean_dxh_xh);
                } else {
#pragma omp simd
                    for (int64_t c = 0; c < dim; ++c)
                        dxr[c] = rs * (dyr[c] * pg[c] - mean_dxh - (xr[c] - m) * rs * mean_dxh_xh);
                }
            }
        },
        [&](int64_t c, double total) {
            if (c < dim)
                pdg[c] += static_cast<float>(total);
            else if (pdb)
                pdb[c - dim] += static_cast<float>(total);
        });
}

}  // namespace moetrain
