// CPU token sampling (MODEL.md 7): greedy argmax at temperature 0 (ties to the lower id);
// otherwise softmax(logits / T) in double, ids sorted by descending p (ties: lower id first),
// top-k, then the smallest prefix whose cumulative p >= top_p, renormalised, and a walk in
// that order until the cumulative probability exceeds u = Philox(seed; step, row).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/cpu_device.h"
#include "shared/mt_math.h"

namespace moetrain {
namespace {
int32_t sample_row(const float* l, int64_t V, const SampleArgs& s, int64_t row) {
    if (s.temperature == 0.0f) {
        int64_t best = 0;
        for (int64_t i = 1; i < V; ++i)
            if (l[i] > l[best]) best = i;
        return static_cast<int32_t>(best);
    }
    const double T = s.temperature;
    double mx = -INFINITY;
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, l[i] / T);
    std::vector<double> p(static_cast<size_t>(V));
    double total = 0;
    for (int64_t i = 0; i < V; ++i) total += (p[i] = std::exp(l[i] / T - mx));
    for (auto& x : p) x /= total;
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    int64_t keep = s.top_k > 0 ? std::min(s.top_k, V) : V;
    if (s.top_p < 1.0f) {
        double cum = 0;
        for (int64_t i = 0; i < keep; ++i) {
            cum += p[order[i]];
            if (cum >= static_cast<double>(s.top_p)) {
                keep = i + 1;
                break;
            }
        }
    }
    double kept = 0;
    for (int64_t i = 0; i < keep; ++i) kept += p[order[i]];
    const double u = mt_philox_uniform(s.seed, s.step, static_cast<uint64_t>(row));
    double cum = 0;
    for (int64_t i = 0; i < keep; ++i) {
        cum += p[order[i]] / kept;
        if (cum > u) return order[i];
    }
    return order[keep - 1];  // rounding left u beyond the last cumulative value
}
}  // namespace

void CpuDevice::sample_impl(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                            const SampleArgs& s) {
    int32_t* po = i32(out_ids);
    const float* pl = f32(logits);
    SampleArgs args = s;  // the Philox step with the device part added (device.h)
    args.step += static_cast<uint32_t>(device_value(s.step_dev));
#pragma omp parallel for schedule(static) if (B > 1)
    for (int64_t b = 0; b < B; ++b) po[b] = sample_row(pl + b * V, V, args, b);
}

}  // namespace moetrain
