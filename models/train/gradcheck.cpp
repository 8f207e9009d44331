// Directional finite-difference gradient check (gradcheck.h). For a tensor p with analytic
// gradient g and a random unit direction u (half along g, half random, so the probe always
// has signal): p+- = f32(p +- eps u), numeric = L(p+) - L(p-), analytic = g . (p+ - p-),
// both in double; the exact perturbation after float rounding is used, so only the loss
// rounding and the O(eps^3) Taylor term separate them.
#include "moetrain/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "model/loss_probe.h"

namespace moetrain {
namespace {

// The per-token losses are float32, so loss differences below ~1e-7 are rounding noise:
// probes aim for a loss change of kTargetDelta and relative errors are taken against at
// least kNoiseFloor.
constexpr double kTargetDelta = 1e-3;
constexpr double kNoiseFloor = 3e-5;
constexpr double kMinStep = 1e-4;

double norm2(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s);
}

struct Probe {
    double numeric = 0, analytic = 0;
};

// One central difference along `dir` (unit norm) with step `eps`; shrinks eps while the
// perturbation changes an MoE routing decision.
Probe probe(LossProbe& losses, Model& model, const ParamInfo& p, const std::vector<float>& p0,
            const std::vector<float>& g, const std::vector<double>& dir, double eps,
            const std::vector<int32_t>& x, const std::vector<int32_t>& y, int B, int T,
            const std::vector<int32_t>& routing0) {
    const size_t n = p0.size();
    std::vector<float> plus(n), minus(n);
    std::vector<int32_t> routing;
    Probe r;
    for (int attempt = 0; attempt < 12; ++attempt, eps *= 0.5) {
        for (size_t i = 0; i < n; ++i) {
            plus[i] = static_cast<float>(p0[i] + eps * dir[i]);
            minus[i] = static_cast<float>(p0[i] - eps * dir[i]);
        }
        bool flipped = false;
        auto loss_at = [&](const std::vector<float>& v) {
            model.set_param(p.name, v);
            routing.clear();
            const double l = losses.loss_f64(x.data(), y.data(), B, T, &routing).loss;
            flipped = flipped || routing != routing0;
            return l;
        };
        r.numeric = loss_at(plus) - loss_at(minus);
        r.analytic = 0;
        for (size_t i = 0; i < n; ++i)
            r.analytic += static_cast<double>(g[i]) * (static_cast<double>(plus[i]) - minus[i]);
        if (!flipped) break;
    }
    model.set_param(p.name, p0);
    return r;
}

}  // namespace

GradcheckResult gradcheck(Model& model, const GradcheckOptions& opts) {
    LossProbe losses(model);
    const ModelConfig& c = model.config();
    MT_CHECK(opts.batch >= 1 && opts.seq_len >= 1 && opts.directions >= 1 && opts.step > 0,
             "gradcheck needs batch, seq_len, directions >= 1 and step > 0");
    const int B = opts.batch, T = std::min(opts.seq_len, c.max_seq_len);
    std::mt19937_64 rng(opts.seed);
    std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
    std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size());
    for (auto& v : x) v = tok(rng);
    for (auto& v : y) v = tok(rng);

    model.zero_grads();
    model.forward_backward(x.data(), y.data(), B, T, 1.0f);
    const std::vector<float> grads = model.get_flat(model.grads_flat());
    std::vector<int32_t> routing0;
    losses.loss_f64(x.data(), y.data(), B, T, &routing0);

    GradcheckResult res;
    res.tolerance = opts.tolerance;
    res.pass = true;
    std::normal_distribution<double> normal;
    for (const ParamInfo& p : model.params()) {
        const std::vector<float> p0 = model.get_param(p.name);
        const std::vector<float> g(grads.begin() + p.offset, grads.begin() + p.offset + p.numel());
        const size_t n = p0.size();
        double ss = 0;
        for (float v : p0) ss += double{v} * v;
        const double scale = std::max(std::sqrt(ss / static_cast<double>(n)), 0.02);
        const double sqrt_n = std::sqrt(static_cast<double>(n));
        std::vector<double> gd(g.begin(), g.end());
        const double gn = norm2(gd);

        TensorGradcheck t;
        t.name = p.name;
        t.pass = true;
        for (int d = 0; d < opts.directions; ++d) {
            std::vector<double> dir(n);
            for (auto& v : dir) v = normal(rng);
            const double rn = norm2(dir);
            for (size_t i = 0; i < n; ++i) dir[i] = dir[i] / rn + (gn > 0 ? gd[i] / gn : 0.0);
            const double dn = norm2(dir);
            for (auto& v : dir) v /= dn;
            // Step so the loss moves by about kTargetDelta, within [kMinStep, opts.step] of
            // the tensor's RMS per element.
            double gu = 0;
            for (size_t i = 0; i < n; ++i) gu += gd[i] * dir[i];
            const double eps = std::clamp(kTargetDelta / (2.0 * std::abs(gu) + 1e-30),
                                          kMinStep * scale * sqrt_n, opts.step * scale * sqrt_n);
            const Probe pr = probe(losses, model, p, p0, g, dir, eps, x, y, B, T, routing0);
            const double err = std::abs(pr.numeric - pr.analytic) /
                               std::max(std::abs(pr.numeric) + std::abs(pr.analytic), kNoiseFloor);
            if (d == 0 || err > t.rel_error) {
                t.rel_error = err;
                t.numeric = pr.numeric;
                t.analytic = pr.analytic;
            }
        }
        t.pass = t.rel_error <= opts.tolerance;
        res.pass = res.pass && t.pass;
        res.max_rel_error = std::max(res.max_rel_error, t.rel_error);
        res.tensors.push_back(t);
    }
    return res;
}

}  // namespace moetrain
