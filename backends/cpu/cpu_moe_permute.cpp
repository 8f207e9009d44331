// CPU MoE token permutation: the stable counting sort of (token, slot) pairs by expert
// (selections dropped by capacity are skipped), the row gather into expert order, and the
// weighted combine back to token order (and its backward). Every output row is written by one
// iteration: no races, deterministic.
#include <algorithm>
#include <vector>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_simd.h"

namespace moetrain {
namespace {
// Every index in 0..limit-1, or -1 (a dropped selection) where the op allows it.
void check_index(const int32_t* index, int64_t n, int64_t limit, const char* op, const char* arg,
                 bool dropped_ok = false) {
    const int32_t lo = dropped_ok ? -1 : 0;
    for (int64_t i = 0; i < n; ++i)
        MT_CHECK(index[i] >= lo && index[i] < limit, op, ": ", arg, "[", i, "] = ", index[i],
                 " outside ", lo, "..", limit - 1);
}
}  // namespace

void CpuDevice::moe_sort_impl(const Tensor& counts, const Tensor& row_token, const Tensor& slot_row,
                              const Tensor& topk_idx, int64_t N, int64_t k, int64_t E) {
    int32_t* pc = i32(counts);
    int32_t* prt = i32(row_token);
    int32_t* psr = i32(slot_row);
    const int32_t* pidx = i32(topk_idx);
    check_index(pidx, N * k, E, "moe_sort", "topk_idx", true);
    std::fill(pc, pc + E, 0);
    for (int64_t s = 0; s < N * k; ++s)
        if (pidx[s] >= 0) pc[pidx[s]]++;
    std::vector<int32_t> next(static_cast<size_t>(E), 0);  // next free row of each expert
    for (int64_t e = 1; e < E; ++e) next[e] = next[e - 1] + pc[e - 1];
    const int64_t total = E > 0 ? next[E - 1] + pc[E - 1] : 0;
    for (int64_t s = 0; s < N * k; ++s) {
        if (pidx[s] < 0) {  // dropped by moe_capacity: no row
            psr[s] = -1;
            continue;
        }
        const int32_t r = next[pidx[s]]++;
        prt[r] = static_cast<int32_t>(s / k);
        psr[s] = r;
    }
    std::fill(prt + total, prt + N * k, 0);  // rows no expert owns: a valid token, never read
}

void CpuDevice::gather_rows_impl(const Tensor& dst, const Tensor& src, const Tensor& index,
                                 int64_t R, int64_t dim) {
    if (R == 0 || dim == 0) return;
    float* pd = f32(dst);
    const float* ps = f32(src);
    const int32_t* pi = i32(index);
    check_index(pi, R, src.numel() / dim, "gather_rows", "index");
#pragma omp parallel for schedule(static) if (R * dim > cpu::kParallelMin)
    for (int64_t r = 0; r < R; ++r)
        std::copy_n(ps + static_cast<int64_t>(pi[r]) * dim, dim, pd + r * dim);
}

void CpuDevice::moe_combine_impl(const Tensor& y, const Tensor& rows, const Tensor& slot_row,
                                 const Tensor& w, int64_t N, int64_t k, int64_t dim,
                                 bool accumulate) {
    if (N == 0 || dim == 0) return;
    float* py = f32(y);
    const float* prows = f32(rows);
    const int32_t* psr = i32(slot_row);
    const float* pw = f32(w);
    check_index(psr, N * k, rows.numel() / dim, "moe_combine", "slot_row", true);
#pragma omp parallel for schedule(static) if (N * dim > cpu::kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
        float* yr = py + n * dim;
        if (!accumulate) std::fill(yr, yr + dim, 0.0f);
        for (int64_t j = 0; j < k; ++j) {
            if (psr[n * k + j] < 0) continue;  // dropped selection
            const float wj = pw ? pw[n * k + j] : 1.0f;
            const float* src = prows + static_cast<int64_t>(psr[n * k + j]) * dim;
#pragma omp simd
            for (int64_t c = 0; c < dim; ++c) yr[c] += wj * src[c];
        }
    }
}

void CpuDevice::moe_combine_bwd_impl(const Tensor& drows, const Tensor& dw, const Tensor& dy,
                                     const Tensor& rows, const Tensor& slot_row, const Tensor& w,
                                     int64_t N, int64_t k, int64_t dim) {
    if (N == 0 || dim == 0) return;
    const auto [pdr, pdw, pdy] = f32s(drows, dw, dy);
    const float* prows = pdw ? f32(rows) : nullptr;
    const int32_t* psr = i32(slot_row);
    const float* pw = f32(w);
    check_index(psr, N * k, drows.numel() / dim, "moe_combine_bwd", "slot_row", true);
    if (prows) check_index(psr, N * k, rows.numel() / dim, "moe_combine_bwd", "slot_row", true);
#pragma omp parallel for schedule(static) if (N * dim > cpu::kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
        const float* dyr = pdy + n * dim;
        for (int64_t j = 0; j < k; ++j) {
            const int64_t r = psr[n * k + j];
            if (r < 0) {  // dropped selection: no row, no weight gradient
                if (pdw) pdw[n * k + j] = 0.0f;
                continue;
            }
            const float wj = pw ? pw[n * k + j] : 1.0f;
            float* dst = pdr + r * dim;
#pragma omp simd
            for (int64_t c = 0; c < dim; ++c) dst[c] = wj * dyr[c];
            if (pdw) {
                const float* src = prows + r * dim;
                pdw[n * k + j] = static_cast<float>(cpu::lane_sum<double>(
                    dim, [&](int64_t c) { return static_cast<double>(dyr[c]) * src[c]; }));
            }
        }
    }
}

}  // namespace moetrain
