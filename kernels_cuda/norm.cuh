// RMSNorm and LayerNorm (MODEL.md 2), forward and backward. One block per row: the row
// statistics are block reductions; the gain / bias gradients are deterministic column sums
// (colsum.cuh) of the per-element products. The pass that writes y / dx reads the row four
// elements per access where the row's pointers allow (vector_access.cuh, decided per row: a
// row of odd length shifts the next row's alignment); the statistics pass stays one element
// per thread step, because each thread's partial sum over elements c, c + blockDim, ... is
// part of the fixed summation order.
#pragma once

#include "colsum.cuh"
#include "common.cuh"
#include "vector_access.cuh"

namespace mtk {

// The backward pass's write of one row of dx: dx[c] = f(dy[c], x[c], g[c]), added to dx when
// accumulate, four elements per access where the row's pointers allow.
template <typename F>
__device__ __forceinline__ void write_dx_row(float* dxr, const float* dyr, const float* xr,
                                             const float* g, int64_t dim, bool accumulate, F f) {
    for_split(vec_split(dim, dxr, dyr, xr, g), threadIdx.x, blockDim.x, [&](auto w, int64_t c) {
        const auto dyv = load_lanes(w, dyr + c), xv = load_lanes(w, xr + c),
                   gv = load_lanes(w, g + c);
        auto d = dyv;  // every lane is overwritten
        for (int u = 0; u < w.n; ++u) d[u] = f(dyv[u], xv[u], gv[u]);
        if (accumulate) {
            const auto old = load_lanes(w, dxr + c);
            for (int u = 0; u < w.n; ++u) d[u] = old[u] + d[u];
        }
        store_lanes(w, dxr + c, d);
    });
}

__global__ void rmsnorm_fwd_kernel(float* __restrict__ y, float* __restrict__ rstd,
                                   const float* __restrict__ x, const float* __restrict__ g,
                                   int64_t dim, float eps) {
    const float* xr = x + blockIdx.x * dim;
    float ss = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) ss += xr[c] * xr[c];
    ss = block_sum(ss);
    float rs = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = rs;
    float* yr = y + blockIdx.x * dim;
    for_split(vec_split(dim, yr, xr, g), threadIdx.x, blockDim.x, [&](auto w, int64_t c) {
        auto v = load_lanes(w, xr + c);
        const auto gv = load_lanes(w, g + c);
        for (int u = 0; u < w.n; ++u) v[u] = v[u] * rs * gv[u];
        store_lanes(w, yr + c, v);
    });
}

// dx = rs * g * dy - x * rs^3 * mean(dy * g * x)
__global__ void rmsnorm_bwd_kernel(float* __restrict__ dx, const float* __restrict__ dy,
                                   const float* __restrict__ x, const float* __restrict__ g,
                                   const float* __restrict__ rstd, int64_t dim, bool accumulate) {
    const int64_t base = blockIdx.x * dim;
    float dot = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
        dot += dy[base + c] * g[c] * x[base + c];
    dot = block_sum(dot) / static_cast<float>(dim);
    const float rs = rstd[blockIdx.x];
    write_dx_row(
        dx + base, dy + base, x + base, g, dim, accumulate,
        [&](float dyc, float xc, float gc) { return rs * gc * dyc - xc * rs * rs * rs * dot; });
}

__global__ void layernorm_fwd_kernel(float* __restrict__ y, float* __restrict__ mean,
                                     float* __restrict__ rstd, const float* __restrict__ x,
                                     const float* __restrict__ g, const float* __restrict__ b,
                                     int64_t dim, float eps) {
    const float* xr = x + blockIdx.x * dim;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) s += xr[c];
    const float mu = block_sum(s) / static_cast<float>(dim);
    float v = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) v += (xr[c] - mu) * (xr[c] - mu);
    const float rs = 1.0f / sqrtf(block_sum(v) / static_cast<float>(dim) + eps);
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = mu;
        rstd[blockIdx.x] = rs;
    }
    float* yr = y + blockIdx.x * dim;
    for_split(vec_split(dim, yr, xr, g, b), threadIdx.x, blockDim.x, [&](auto w, int64_t c) {
        auto v = load_lanes(w, xr + c);
        const auto gv = load_lanes(w, g + c);
        const auto bv = b ? load_lanes(w, b + c) : decltype(gv){};  // zeros without a bias
        for (int u = 0; u < w.n; ++u) v[u] = (v[u] - mu) * rs * gv[u] + bv[u];
        store_lanes(w, yr + c, v);
    });
}

// dx = rs * (dy*g - mean(dy*g) - xhat * mean(dy*g*xhat))
__global__ void layernorm_bwd_kernel(float* __restrict__ dx, const float* __restrict__ dy,
                                     const float* __restrict__ x, const float* __restrict__ g,
                                     const float* __restrict__ mean, const float* __restrict__ rstd,
                                     int64_t dim, bool accumulate) {
    const int64_t base = blockIdx.x * dim;
    const float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
    float a = 0.0f, bsum = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
        float dxh = dy[base + c] * g[c];
        a += dxh;
        bsum += dxh * (x[base + c] - mu) * rs;
    }
    const float mean_dxh = block_sum(a) / static_cast<float>(dim);
    const float mean_dxh_xh = block_sum(bsum) / static_cast<float>(dim);
    write_dx_row(dx + base, dy + base, x + base, g, dim, accumulate,
                 [&](float dyc, float xc, float gc) {
                     const float xh = (xc - mu) * rs;
                     return rs * (dyc * gc - mean_dxh - xh * mean_dxh_xh);
                 });
}

// Column-sum terms of the gain gradients.
struct RmsGainTerm {  // dy * x * rstd[r]
    const float *dy, *x, *rstd;
    int64_t cols;
    __device__ float operator()(int64_t r, int64_t c) const {
        return dy[r * cols + c] * x[r * cols + c] * rstd[r];
    }
};
struct LnGainTerm {  // dy * (x - mean[r]) * rstd[r]
    const float *dy, *x, *mean, *rstd;
    int64_t cols;
    __device__ float operator()(int64_t r, int64_t c) const {
        return dy[r * cols + c] * ((x[r * cols + c] - mean[r]) * rstd[r]);
    }
};

void rmsnorm_fwd(Stream s, float* y, float* rstd, const float* x, const float* g, int64_t rows,
                 int64_t dim, float eps) {
    if (rows > 0 && dim > 0)
        MT_LAUNCH(rmsnorm_fwd_kernel, per_row(rows, dim), s, y, rstd, x, g, dim, eps);
}

// scratch: colsum_scratch_bytes(rows, dim) (also layernorm_bwd).
void rmsnorm_bwd(Stream s, float* dx, float* dg, const float* dy, const float* x, const float* g,
                 const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx, float* scratch) {
    if (rows <= 0 || dim <= 0) return;
    MT_LAUNCH(rmsnorm_bwd_kernel, per_row(rows, dim), s, dx, dy, x, g, rstd, dim, accumulate_dx);
    colsum(s, RmsGainTerm{dy, x, rstd, dim}, rows, dim, dg, scratch);
}

void layernorm_fwd(Stream s, float* y, float* mean, float* rstd, const float* x, const float* g,
                   const float* b, int64_t rows, int64_t dim, float eps) {
    if (rows > 0 && dim > 0)
        MT_LAUNCH(layernorm_fwd_kernel, per_row(rows, dim), s, y, mean, rstd, x, g, b, dim, eps);
}

void layernorm_bwd(Stream s, float* dx, float* dg, float* db, const float* dy, const float* x,
                   const float* g, const float* mean, const float* rstd, int64_t rows, int64_t dim,
                   bool accumulate_dx, float* scratch) {
    if (rows <= 0 || dim <= 0) return;
    MT_LAUNCH(layernorm_bwd_kernel, per_row(rows, dim), s, dx, dy, x, g, mean, rstd, dim,
              accumulate_dx);
    colsum(s, LnGainTerm{dy, x, mean, rstd, dim}, rows, dim, dg, scratch);
    if (db) colsum(s, MatrixTerm{dy, dim}, rows, dim, db, scratch);
}

}  // namespace mtk
