// CPU MoE load control (MODEL.md 2): capacity admission in slot-then-token priority order (and
// the shares of the data-parallel admission offsets), the expert-count accumulator over
// micro-batches and the expert-bias update in float64. Serial: the admission is a scan over N*k
// selections and the others touch E (or R k E) elements.
#include <algorithm>
#include <vector>

#include "cpu/cpu_device.h"

namespace moetrain {

void CpuDevice::moe_capacity_impl(const Tensor& kept_idx, const Tensor& counts,
                                  const Tensor& topk_idx, const Tensor& offsets, int64_t N,
                                  int64_t k, int64_t E, int64_t capacity) {
    int32_t* pkept = i32(kept_idx);
    int32_t* pc = i32(counts);
    const int32_t* pidx = i32(topk_idx);
    const int32_t* poff = i32(offsets);
    for (int64_t s = 0; s < N * k; ++s)
        MT_CHECK(pidx[s] >= 0 && pidx[s] < E, "moe_capacity: topk_idx[", s, "] = ", pidx[s],
                 " outside 0..", E - 1);
    if (poff)
        for (int64_t i = 0; i < k * E; ++i)
            MT_CHECK(poff[i] >= 0, "moe_capacity: offsets[", i, "] = ", poff[i], " is negative");
    std::fill(pc, pc + E, 0);
    for (int64_t j = 0; j < k; ++j) {  // priority: slot j first, then token n
        for (int64_t n = 0; n < N; ++n) {
            const int32_t e = pidx[n * k + j];
            const int64_t before = (poff ? poff[j * E + e] : 0) + pc[e];
            pkept[n * k + j] = before < capacity ? e : -1;
            pc[e]++;
        }
    }
}

void CpuDevice::moe_capacity_shares_impl(const Tensor& shares, const Tensor& topk_idx, int64_t N,
                                         int64_t k, int64_t E, int64_t rank, int64_t ranks) {
    int32_t* ps = i32(shares);
    const int32_t* pidx = i32(topk_idx);
    std::vector<int32_t> c(static_cast<size_t>(k * E), 0);  // [j, e] selections of this rank
    for (int64_t s = 0; s < N * k; ++s) {
        MT_CHECK(pidx[s] >= 0 && pidx[s] < E, "moe_capacity_shares: topk_idx[", s, "] = ", pidx[s],
                 " outside 0..", E - 1);
        c[static_cast<size_t>((s % k) * E + pidx[s])]++;
    }
    for (int64_t e = 0; e < E; ++e) {
        int32_t higher = 0;  // this rank's selections of e in the slots before j
        for (int64_t j = 0; j < k; ++j) {
            const int32_t cj = c[static_cast<size_t>(j * E + e)];
            for (int64_t q = 0; q < ranks; ++q)
                ps[(q * k + j) * E + e] = (q != rank ? higher : 0) + (rank < q ? cj : 0);
            higher += cj;
        }
    }
}

void CpuDevice::add_counts_impl(const Tensor& acc, const Tensor& counts, int64_t n) {
    int32_t* pa = i32(acc);
    const int32_t* pc = i32(counts);
    for (int64_t i = 0; i < n; ++i) pa[i] += pc[i];
}

void CpuDevice::expert_bias_update_impl(const Tensor& bias, const Tensor& counts, int64_t E,
                                        double rate) {
    float* pb = f32(bias);
    const int32_t* pc = i32(counts);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += pc[e];
    const double mean = sum / static_cast<double>(E);
    for (int64_t e = 0; e < E; ++e) {
        const double d = mean - pc[e];
        const double sign = d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0);
        pb[e] = static_cast<float>(static_cast<double>(pb[e]) + rate * sign);
    }
}

}  // namespace moetrain
