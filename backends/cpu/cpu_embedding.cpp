// CPU embedding lookup and its gradient. The backward groups the positions by token id
// (stable sort) so each table row is owned by one thread and its duplicates are summed in
// position order, in double: deterministic and race-free.
#include <algorithm>
#include <numeric>
#include <vector>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"

namespace moetrain {
namespace {
void check_ids(const int32_t* ids, int64_t n, int64_t rows, const char* op) {
    for (int64_t i = 0; i < n; ++i)
        MT_CHECK(ids[i] >= 0 && ids[i] < rows, op, ": id ", ids[i], " at position ", i,
                 " is outside the table of ", rows, " rows");
}
}  // namespace

void CpuDevice::embedding_fwd_impl(const Tensor& out, const Tensor& table, const Tensor& ids,
                                   int64_t n, int64_t dim, bool accumulate) {
    float* o = f32(out);
    const float* t = f32(table);
    const int32_t* id = i32(ids);
    check_ids(id, n, table.numel() / dim, "embedding_fwd");
#pragma omp parallel for schedule(static) if (n * dim > cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
        const float* src = t + static_cast<int64_t>(id[i]) * dim;
        float* dst = o + i * dim;
        if (accumulate) {
#pragma omp simd
            for (int64_t c = 0; c < dim; ++c) dst[c] += src[c];
        } else {
            std::copy(src, src + dim, dst);
        }
    }
}

void CpuDevice::embedding_bwd_impl(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                   int64_t n, int64_t dim) {
    float* dt = f32(dtable);
    const float* dy = f32(dout);
    const int32_t* id = i32(ids);
    check_ids(id, n, dtable.numel() / dim, "embedding_bwd");
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return id[a] < id[b]; });
    std::vector<int64_t> group_start;  // start of each run of equal ids in `order`
    for (int64_t i = 0; i < n; ++i)
        if (i == 0 || id[order[i]] != id[order[i - 1]]) group_start.push_back(i);
    group_start.push_back(n);
    const int64_t groups = static_cast<int64_t>(group_start.size()) - 1;
#pragma omp parallel if (n * dim > cpu::kParallelMin)
    {
        std::vector<double> acc(static_cast<size_t>(dim));
#pragma omp for schedule(static)
        for (int64_t gi = 0; gi < groups; ++gi) {
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t i = group_start[gi]; i < group_start[gi + 1]; ++i) {
                const float* src = dy + order[i] * dim;
                for (int64_t c = 0; c < dim; ++c) acc[c] += src[c];
            }
            float* dst = dt + static_cast<int64_t>(id[order[group_start[gi]]]) * dim;
            for (int64_t c = 0; c < dim; ++c) dst[c] += static_cast<float>(acc[c]);
        }
    }
}

}  // namespace moetrain
