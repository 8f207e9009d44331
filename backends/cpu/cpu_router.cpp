// CPU MoE routers (MODEL.md 2-3): softmax / sigmoid top-k forward (selection by score +
// expert bias, ties to the lower expert index; routed scaling), its backward including the
// load-balancing and z-loss terms, the two loss values, and the hash router. One token row per
// iteration; sums in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"
#include "cpu/cpu_rowmath.h"
#include "shared/mt_math.h"

namespace moetrain {
namespace {
// f_e = counts[e] / (N k), the routed fraction per expert, held constant in the backward.
std::vector<double> routed_fraction(const int32_t* counts, int64_t N, int64_t E, int64_t k) {
    std::vector<double> f(static_cast<size_t>(E), 0.0);
    if (N == 0) return f;
    for (int64_t e = 0; e < E; ++e)
        f[e] = counts[e] / (static_cast<double>(N) * static_cast<double>(k));
    return f;
}
}  // namespace

void CpuDevice::router_fwd_impl(const Tensor& probs, const Tensor& lse, const Tensor& topk_idx,
                                const Tensor& topk_w, const Tensor& logits, const Tensor& bias,
                                int64_t N, int64_t E, int64_t k, const RouterArgs& r) {
    float* pp = f32(probs);
    float* plse = f32(lse);
    int32_t* pidx = i32(topk_idx);
    float* pw = f32(topk_w);
    const float* pl = f32(logits);
    const float* pb = f32(bias);
#pragma omp parallel if (N * E > cpu::kParallelMin)
    {
        std::vector<float> q(static_cast<size_t>(E));  // the selection key score + bias
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; ++n) {
            const float* l = pl + n * E;
            float* p = pp + n * E;
            const double lse_n = cpu::row_logsumexp(l, E);
            plse[n] = static_cast<float>(lse_n);
            for (int64_t e = 0; e < E; ++e)
                p[e] = r.sigmoid ? mt_sigmoid(l[e]) : static_cast<float>(std::exp(l[e] - lse_n));
            for (int64_t e = 0; e < E; ++e) q[e] = pb ? p[e] + pb[e] : p[e];
            // Selection of the k largest keys, strict '>' so that ties go to the lower index.
            int32_t* idx = pidx + n * k;
            double wsum = 0;
            for (int64_t j = 0; j < k; ++j) {
                int64_t best = -1;
                for (int64_t e = 0; e < E; ++e) {
                    if (std::find(idx, idx + j, static_cast<int32_t>(e)) != idx + j) continue;
                    if (best < 0 || q[e] > q[best]) best = e;
                }
                idx[j] = static_cast<int32_t>(best);
                wsum += p[best];
            }
            for (int64_t j = 0; j < k; ++j) {
                const float w = r.norm_topk ? static_cast<float>(p[idx[j]] / wsum) : p[idx[j]];
                pw[n * k + j] = w * r.scaling;
            }
        }
    }
}

void CpuDevice::router_bwd_impl(const Tensor& dlogits, const Tensor& dtopk_w, const Tensor& probs,
                                const Tensor& lse, const Tensor& logits, const Tensor& topk_idx,
                                const Tensor& topk_w, const Tensor& counts, int64_t N, int64_t E,
                                int64_t k, const RouterArgs& r, float aux_alpha, float z_alpha,
                                float scale) {
    const auto [pdl, pdw, pp, plse] = f32s(dlogits, dtopk_w, probs, lse);
    const float* pl = f32(logits);
    const int32_t* pidx = i32(topk_idx);
    const float* pw = f32(topk_w);
    const int32_t* pc = i32(counts);
    for (int64_t s = 0; s < N * k; ++s)
        MT_CHECK(pidx[s] >= 0 && pidx[s] < E, "router_bwd: expert index ", pidx[s], " outside 0..",
                 E - 1);
    const std::vector<double> f = routed_fraction(pc, N, E, k);
    const double nN = static_cast<double>(std::max<int64_t>(N, 1));
    // d(scale * aux)/d score[n,e] = aux_c * f_e (softmax); sigmoid divides by the row sum.
    const double aux_c = static_cast<double>(scale) * aux_alpha * static_cast<double>(E) / nN;
    const double z_coef = static_cast<double>(scale) * z_alpha * 2.0 / nN;
    const double a = r.scaling;
#pragma omp parallel if (N * E > cpu::kParallelMin)
    {
        std::vector<double> ds(static_cast<size_t>(E));  // d loss / d score[n, :]
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; ++n) {
            const float* p = pp + n * E;
            const float* l = pl + n * E;
            const int32_t* idx = pidx + n * k;
            if (r.sigmoid) {
                double T = 0, fs = 0;  // sum_j s_j; sum_e f_e s_e
                for (int64_t e = 0; e < E; ++e) {
                    T += p[e];
                    fs += f[e] * p[e];
                }
                for (int64_t e = 0; e < E; ++e) ds[e] = aux_c * (f[e] / T - fs / (T * T));
            } else {
                for (int64_t e = 0; e < E; ++e) ds[e] = aux_c * f[e];
            }
            double s = 0, wdot = 0;  // sum of selected scores; sum_j dw_j w_j
            for (int64_t j = 0; j < k; ++j) {
                s += p[idx[j]];
                wdot += static_cast<double>(pdw[n * k + j]) * pw[n * k + j];
            }
            for (int64_t j = 0; j < k; ++j) {
                const double dw = pdw[n * k + j];
                ds[idx[j]] += r.norm_topk ? (a * dw - wdot) / s : a * dw;
            }
            const double zt = z_coef * plse[n];
            if (r.sigmoid) {
                for (int64_t e = 0; e < E; ++e) {
                    const double sm = std::exp(static_cast<double>(l[e]) - plse[n]);
                    pdl[n * E + e] = static_cast<float>(p[e] * (1.0 - p[e]) * ds[e] + zt * sm);
                }
            } else {
                double pdp = 0;
                for (int64_t e = 0; e < E; ++e) pdp += p[e] * ds[e];
                for (int64_t e = 0; e < E; ++e)
                    pdl[n * E + e] = static_cast<float>(p[e] * (ds[e] - pdp) + zt * p[e]);
            }
        }
    }
}

void CpuDevice::router_aux_loss_impl(const Tensor& out, const Tensor& probs, const Tensor& lse,
                                     const Tensor& counts, int64_t N, int64_t E, int64_t k,
                                     const RouterArgs& r, float aux_alpha, float z_alpha) {
    const auto [po, pp, plse] = f32s(out, probs, lse);
    const int32_t* pc = i32(counts);
    if (N == 0) return;
    const std::vector<double> f = routed_fraction(pc, N, E, k);
    std::vector<double> P(static_cast<size_t>(E), 0.0);  // sum over tokens of P's terms
    double z = 0;
    for (int64_t n = 0; n < N; ++n) {
        const float* p = pp + n * E;
        double T = 1;  // the sigmoid scores' row sum (softmax: p itself)
        if (r.sigmoid) {
            T = 0;
            for (int64_t e = 0; e < E; ++e) T += p[e];
        }
        for (int64_t e = 0; e < E; ++e) P[e] += p[e] / T;
        z += static_cast<double>(plse[n]) * plse[n];
    }
    double aux = 0;
    for (int64_t e = 0; e < E; ++e) aux += f[e] * P[e];
    const double nN = static_cast<double>(N);
    po[0] += static_cast<float>(aux_alpha * static_cast<double>(E) * aux / nN);
    po[1] += static_cast<float>(z_alpha * z / nN);
}

void CpuDevice::hash_route_impl(const Tensor& topk_idx, const Tensor& ids, int64_t N, int64_t layer,
                                int64_t E) {
    int32_t* pidx = i32(topk_idx);
    const int32_t* pid = i32(ids);
#pragma omp parallel for schedule(static) if (N > 4 * cpu::kParallelMin)
    for (int64_t n = 0; n < N; ++n)
        pidx[n] = mt_hash_expert(pid[n], static_cast<int>(layer), static_cast<int>(E));
}

}  // namespace moetrain
