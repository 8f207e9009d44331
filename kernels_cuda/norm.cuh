// RMSNorm and LayerNorm (MODEL.md 2), forward and backward. One block per row: the row
// statistics are block reductions; the gain / bias gradients are deterministic column sums
// (colsum.cuh) of the per-element products, LayerNorm's two in one pass over dy and x.
//
// A row's streams (x; dy and x backward) are read from global memory once: when they fit in
// shared memory (launch.h norm_rows) the block first copies them there, and the statistics and
// the pass that writes y / dx read the copy; longer rows are read from global memory in each
// pass. The copy and the writing pass access the row four elements at a time where the row's
// pointers allow (vector_access.cuh, decided per row: a row of odd length shifts the next row's
// alignment). The statistics stay one element per thread step, c, c + blockDim, ..., because
// each thread's partial sum is part of the fixed summation order; both paths sum the same values
// in the same order, so they give the same bits.
#pragma once

#include "colsum.cuh"
#include "common.cuh"
#include "vector_access.cuh"

namespace mtk {

// A row's N streams as a kernel reads them: cache[i] is stream i's shared-memory copy (null when
// the launch has none) and read[i] what the statistics loops read (that copy, or global memory).
template <int N>
struct RowStreams {
    const float* cache[N];
    const float* read[N];
};

// The row's streams src[i][0, dim): when `cached`, copied with the row's split to shared memory
// (stream i at i * dim), then a barrier. Called by every thread of the block.
template <int N>
__device__ __forceinline__ RowStreams<N> row_streams(const VecSplit& split, bool cached,
                                                     const float* const (&src)[N], int64_t dim) {
    float* copy = cached ? mt_dynamic_shared<float>() : nullptr;
    RowStreams<N> rows{};
    for (int i = 0; i < N; ++i) {
        rows.cache[i] = copy ? copy + i * dim : nullptr;
        rows.read[i] = copy ? copy + i * dim : src[i];
    }
    if (!copy) return rows;
    for_split(split, threadIdx.x, blockDim.x, [&](auto w, int64_t c) {
        for (int i = 0; i < N; ++i) {
            const auto v = load_lanes(w, src[i] + c);
            for (int u = 0; u < w.n; ++u) copy[i * dim + c + u] = v[u];
        }
    });
    __syncthreads();
    return rows;
}

// Lanes of a row stream at element c: from the shared-memory copy when there is one (cache not
// null), else from global memory.
template <int W>
__device__ __forceinline__ Lanes<float, W> row_lanes(Width<W> w, const float* global,
                                                     const float* cache, int64_t c) {
    if (!cache) return load_lanes(w, global + c);
    Lanes<float, W> v;
    for (int u = 0; u < W; ++u) v[u] = cache[c + u];
    return v;
}

// The backward pass's write of one row of dx: dx[c] = f(dy[c], x[c], g[c]), added to dx when
// accumulate; dy and x from their copies (cdy, cx) when cached.
template <typename F>
__device__ __forceinline__ void write_dx_row(const VecSplit& split, float* dxr, const float* dyr,
                                             const float* xr, const float* cdy, const float* cx,
                                             const float* g, bool accumulate, F f) {
    for_split(split, threadIdx.x, blockDim.x, [&](auto w, int64_t c) {
        const auto dyv = row_lanes(w, dyr, cdy, c), xv = row_lanes(w, xr, cx, c),
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

// The forward kernels write y in its dtype y_kind (FloatKind: 16-bit y rounded from the f32
// value, store_from_f32).
__device__ __forceinline__ void* out_row(void* y, int y_kind, int64_t dim) {
    return static_cast<char*>(y) + blockIdx.x * dim * kind_bytes(y_kind);
}

__global__ void rmsnorm_fwd_kernel(void* __restrict__ y, int y_kind, float* __restrict__ rstd,
                                   const float* __restrict__ x, const float* __restrict__ g,
                                   int64_t dim, float eps, bool cached) {
    const float* xg = x + blockIdx.x * dim;
    void* yr = out_row(y, y_kind, dim);
    const VecSplit split = vec_split(dim, VecPtr{yr, kind_bytes(y_kind)}, xg, g);
    const auto rows = row_streams(split, cached, {xg}, dim);
    const float *cx = rows.cache[0], *xr = rows.read[0];
    float ss = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) ss += xr[c] * xr[c];
    ss = block_sum(ss);
    float rs = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = rs;
    for_split(split, threadIdx.x, blockDim.x, [&](auto w, int64_t c) {
        auto v = row_lanes(w, xg, cx, c);
        const auto gv = load_lanes(w, g + c);
        for (int u = 0; u < w.n; ++u) v[u] = v[u] * rs * gv[u];
        store_from_f32(w, yr, y_kind, c, v);
    });
}

// dx = rs * g * dy - x * rs^3 * mean(dy * g * x)
__global__ void rmsnorm_bwd_kernel(float* __restrict__ dx, const float* __restrict__ dy,
                                   const float* __restrict__ x, const float* __restrict__ g,
                                   const float* __restrict__ rstd, int64_t dim, bool accumulate,
                                   bool cached) {
    const int64_t base = blockIdx.x * dim;
    const VecSplit split = vec_split(dim, dx + base, dy + base, x + base, g);
    const auto rows = row_streams(split, cached, {dy + base, x + base}, dim);
    const float *dyr = rows.read[0], *xr = rows.read[1];
    float dot = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dot += dyr[c] * g[c] * xr[c];
    dot = block_sum(dot) / static_cast<float>(dim);
    const float rs = rstd[blockIdx.x];
    write_dx_row(
        split, dx + base, dy + base, x + base, rows.cache[0], rows.cache[1], g, accumulate,
        [&](float dyc, float xc, float gc) { return rs * gc * dyc - xc * rs * rs * rs * dot; });
}

__global__ void layernorm_fwd_kernel(void* __restrict__ y, int y_kind, float* __restrict__ mean,
                                     float* __restrict__ rstd, const float* __restrict__ x,
                                     const float* __restrict__ g, const float* __restrict__ b,
                                     int64_t dim, float eps, bool cached) {
    const float* xg = x + blockIdx.x * dim;
    void* yr = out_row(y, y_kind, dim);
    const VecSplit split = vec_split(dim, VecPtr{yr, kind_bytes(y_kind)}, xg, g, b);
    const auto rows = row_streams(split, cached, {xg}, dim);
    const float *cx = rows.cache[0], *xr = rows.read[0];
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
    for_split(split, threadIdx.x, blockDim.x, [&](auto w, int64_t c) {
        auto v = row_lanes(w, xg, cx, c);
        const auto gv = load_lanes(w, g + c);
        const auto bv = b ? load_lanes(w, b + c) : decltype(gv){};  // zeros without a bias
        for (int u = 0; u < w.n; ++u) v[u] = (v[u] - mu) * rs * gv[u] + bv[u];
        store_from_f32(w, yr, y_kind, c, v);
    });
}

// dx = rs * (dy*g - mean(dy*g) - xhat * mean(dy*g*xhat))
__global__ void layernorm_bwd_kernel(float* __restrict__ dx, const float* __restrict__ dy,
                                     const float* __restrict__ x, const float* __restrict__ g,
                                     const float* __restrict__ mean, const float* __restrict__ rstd,
                                     int64_t dim, bool accumulate, bool cached) {
    const int64_t base = blockIdx.x * dim;
    const VecSplit split = vec_split(dim, dx + base, dy + base, x + base, g);
    const auto rows = row_streams(split, cached, {dy + base, x + base}, dim);
    const float *dyr = rows.read[0], *xr = rows.read[1];
    const float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
    float a = 0.0f, bsum = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
        float dxh = dyr[c] * g[c];
        a += dxh;
        bsum += dxh * (xr[c] - mu) * rs;
    }
    const float mean_dxh = block_sum(a) / static_cast<float>(dim);
    const float mean_dxh_xh = block_sum(bsum) / static_cast<float>(dim);
    write_dx_row(split, dx + base, dy + base, x + base, rows.cache[0], rows.cache[1], g, accumulate,
                 [&](float dyc, float xc, float gc) {
                     const float xh = (xc - mu) * rs;
                     return rs * (dyc * gc - mean_dxh - xh * mean_dxh_xh);
                 });
}

// Column-sum terms of the gain gradients (and LayerNorm's bias gradient: the second output).
struct RmsGainTerm {  // dy * x * rstd[r]
    static constexpr int kOutputs = 1;
    const float *dy, *x, *rstd;
    int64_t cols;
    template <int W>
    __device__ ColLanes<1, W> operator()(Width<W> w, int64_t r, int64_t c) const {
        const auto d = load_lanes(w, dy + r * cols + c), xv = load_lanes(w, x + r * cols + c);
        const float rs = rstd[r];
        ColLanes<1, W> t;
        for (int u = 0; u < W; ++u) t.v[0][u] = d[u] * xv[u] * rs;
        return t;
    }
    bool vectorisable() const { return rows_vectorisable(cols, dy, x); }
};
template <int K>  // K = 1: dg += dy * (x - mean[r]) * rstd[r]; K = 2: also db += dy
struct LnGradTerm {
    static constexpr int kOutputs = K;
    const float *dy, *x, *mean, *rstd;
    int64_t cols;
    template <int W>
    __device__ ColLanes<K, W> operator()(Width<W> w, int64_t r, int64_t c) const {
        const auto d = load_lanes(w, dy + r * cols + c), xv = load_lanes(w, x + r * cols + c);
        const float mu = mean[r], rs = rstd[r];
        ColLanes<K, W> t;
        for (int u = 0; u < W; ++u) t.v[0][u] = d[u] * ((xv[u] - mu) * rs);
        if constexpr (K == 2)
            for (int u = 0; u < W; ++u) t.v[1][u] = d[u];
        return t;
    }
    bool vectorisable() const { return rows_vectorisable(cols, dy, x); }
};

// y of dtype y_kind (f32, or the f32 values rounded to bf16 / f16).
void rmsnorm_fwd(Stream s, void* y, float* rstd, const float* x, const float* g, int64_t rows,
                 int64_t dim, float eps, FloatKind y_kind = FloatKind::f32) {
    if (rows > 0 && dim > 0)
        MT_LAUNCH(rmsnorm_fwd_kernel, norm_rows(rows, dim, 1), s, y, static_cast<int>(y_kind), rstd,
                  x, g, dim, eps, norm_row_cached(dim, 1));
}

// scratch: norm_bwd_scratch_bytes(rows, dim) (also layernorm_bwd).
void rmsnorm_bwd(Stream s, float* dx, float* dg, const float* dy, const float* x, const float* g,
                 const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx, float* scratch) {
    if (rows <= 0 || dim <= 0) return;
    MT_LAUNCH(rmsnorm_bwd_kernel, norm_rows(rows, dim, 2), s, dx, dy, x, g, rstd, dim,
              accumulate_dx, norm_row_cached(dim, 2));
    colsum(s, RmsGainTerm{dy, x, rstd, dim}, rows, dim, ColsumOut<1>{{dg}}, scratch);
}

// y as rmsnorm_fwd's.
void layernorm_fwd(Stream s, void* y, float* mean, float* rstd, const float* x, const float* g,
                   const float* b, int64_t rows, int64_t dim, float eps,
                   FloatKind y_kind = FloatKind::f32) {
    if (rows > 0 && dim > 0)
        MT_LAUNCH(layernorm_fwd_kernel, norm_rows(rows, dim, 1), s, y, static_cast<int>(y_kind),
                  mean, rstd, x, g, b, dim, eps, norm_row_cached(dim, 1));
}

void layernorm_bwd(Stream s, float* dx, float* dg, float* db, const float* dy, const float* x,
                   const float* g, const float* mean, const float* rstd, int64_t rows, int64_t dim,
                   bool accumulate_dx, float* scratch) {
    if (rows <= 0 || dim <= 0) return;
    MT_LAUNCH(layernorm_bwd_kernel, norm_rows(rows, dim, 2), s, dx, dy, x, g, mean, rstd, dim,
              accumulate_dx, norm_row_cached(dim, 2));
    if (db)
        colsum(s, LnGradTerm<2>{dy, x, mean, rstd, dim}, rows, dim, ColsumOut<2>{{dg, db}},
               scratch);
    else
        colsum(s, LnGradTerm<1>{dy, x, mean, rstd, dim}, rows, dim, ColsumOut<1>{{dg}}, scratch);
}

}  // namespace mtk
