// Float64 reference of MODEL.md (see reference_model.h). Written straight from the text,
// one token / head / expert at a time.
#include "reference_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

namespace moetrain::refmodel {
namespace {

using Mat = std::vector<std::vector<double>>;  // [rows][cols]

const std::vector<double>& get(const Weights& w, const std::string& name) {
    auto it = w.find(name);
    if (it == w.end()) throw std::runtime_error("reference model: missing weight " + name);
    return it->second;
}
bool has(const Weights& w, const std::string& name) {
    return w.count(name) > 0;
}

// y = x @ W^T + b for one vector; W [out, in] row-major.
std::vector<double> linear(const std::vector<double>& x, const std::vector<double>& W,
                           const std::vector<double>* b, size_t out, size_t offset = 0) {
    const size_t in = x.size();
    std::vector<double> y(out, 0.0);
    for (size_t o = 0; o < out; ++o) {
        double s = b ? (*b)[o] : 0.0;
        for (size_t i = 0; i < in; ++i) s += W[offset + o * in + i] * x[i];
        y[o] = s;
    }
    return y;
}

std::vector<double> norm(const ModelConfig& c, const Weights& w, const std::string& prefix,
                         const std::vector<double>& x) {
    const size_t D = x.size();
    const auto& g = get(w, prefix + ".weight");
    std::vector<double> y(D);
    if (c.norm == NormKind::rmsnorm) {
        double ms = 0;
        for (double v : x) ms += v * v;
        const double r = 1.0 / std::sqrt(ms / D + c.norm_eps);
        for (size_t i = 0; i < D; ++i) y[i] = x[i] * r * g[i];
    } else {
        double mean = 0, var = 0;
        for (double v : x) mean += v;
        mean /= D;
        for (double v : x) var += (v - mean) * (v - mean);
        var /= D;
        const double r = 1.0 / std::sqrt(var + c.norm_eps);
        const std::vector<double>* b =
            has(w, prefix + ".bias") ? &get(w, prefix + ".bias") : nullptr;
        for (size_t i = 0; i < D; ++i) y[i] = (x[i] - mean) * r * g[i] + (b ? (*b)[i] : 0.0);
    }
    return y;
}

// Half-split RoPE of one head vector at position t.
void rope(const ModelConfig& c, std::vector<double>& v, size_t off, int t) {
    const int h = c.head_dim;
    const double theta =
        c.rope_theta * std::pow(c.rope_ntk_alpha, static_cast<double>(h) / (h - 2.0));
    for (int i = 0; i < h / 2; ++i) {
        const double inv = std::pow(theta, -2.0 * i / h);
        const double a = t * inv, cs = std::cos(a), sn = std::sin(a);
        const double x0 = v[off + i], x1 = v[off + i + h / 2];
        v[off + i] = x0 * cs - x1 * sn;
        v[off + i + h / 2] = x1 * cs + x0 * sn;
    }
}

double act(FfnKind k, double z) {
    switch (k) {
        case FfnKind::gelu:
            return 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
        case FfnKind::relu:
            return z > 0 ? z : 0.0;
        case FfnKind::swiglu:
            return z / (1.0 + std::exp(-z));  // silu (gate)
    }
    return 0;
}

// A dense FFN of width F whose matrices start at element `off` of the named tensors.
std::vector<double> ffn(const ModelConfig& c, const std::vector<double>& x,
                        const std::vector<double>* wg, const std::vector<double>& wu,
                        const std::vector<double>& wd, const std::vector<double>* bg,
                        const std::vector<double>* bu, const std::vector<double>* bd, size_t F,
                        size_t off_in, size_t off_out) {
    std::vector<double> up = linear(x, wu, bu, F, off_in);
    std::vector<double> hid(F);
    if (c.ffn == FfnKind::swiglu) {
        std::vector<double> gate = linear(x, *wg, bg, F, off_in);
        for (size_t i = 0; i < F; ++i) hid[i] = act(FfnKind::swiglu, gate[i]) * up[i];
    } else {
        for (size_t i = 0; i < F; ++i) hid[i] = act(c.ffn, up[i]);
    }
    return linear(hid, wd, bd, x.size(), off_out);
}

const std::vector<double>* opt(const Weights& w, const std::string& name) {
    return has(w, name) ? &get(w, name) : nullptr;
}

std::vector<double> dense_ffn(const ModelConfig& c, const Weights& w, const std::string& p,
                              const std::vector<double>& x, size_t F) {
    return ffn(c, x, opt(w, p + ".w_gate.weight"), get(w, p + ".w_up.weight"),
               get(w, p + ".w_down.weight"), opt(w, p + ".w_gate.bias"), opt(w, p + ".w_up.bias"),
               opt(w, p + ".w_down.bias"), F, 0, 0);
}

}  // namespace

uint32_t mix32(uint32_t z) {
    z ^= z >> 16;
    z *= 0x85EBCA6Bu;
    z ^= z >> 13;
    z *= 0xC2B2AE35u;
    z ^= z >> 16;
    return z;
}

int hash_expert(int token, int layer, int n_experts) {
    const uint32_t z =
        static_cast<uint32_t>(token) + 0x9E3779B9u * static_cast<uint32_t>(layer + 1);
    return static_cast<int>(mix32(z) % static_cast<uint32_t>(n_experts));
}

void route_topk(const MoeConfig& m, const std::vector<double>& logits,
                const std::vector<double>& bias, std::vector<double>& p, std::vector<int>& idx,
                std::vector<double>& wts) {
    const size_t E = logits.size();
    const double mx = *std::max_element(logits.begin(), logits.end());
    p.assign(E, 0.0);
    double s = 0;
    for (size_t e = 0; e < E; ++e) s += p[e] = std::exp(logits[e] - mx);
    for (auto& v : p) v /= s;
    if (m.router == RouterKind::sigmoid_topk)
        for (size_t e = 0; e < E; ++e) p[e] = 1.0 / (1.0 + std::exp(-logits[e]));
    std::vector<double> q(p);
    for (size_t e = 0; e < bias.size(); ++e) q[e] += bias[e];
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return q[a] > q[b]; });
    idx.assign(order.begin(), order.begin() + m.top_k);
    wts.clear();
    double sel = 0;
    for (int e : idx) sel += p[e];
    for (int e : idx) wts.push_back((m.norm_topk_prob ? p[e] / sel : p[e]) * m.routed_scaling);
}

Loss loss(const ModelConfig& c, const Weights& w, const std::vector<int32_t>& x,
          const std::vector<int32_t>& y, int B, int T, std::vector<double>* logits_out,
          bool training, int64_t* dropped) {
    if (dropped) *dropped = 0;
    const size_t D = c.d_model, V = c.vocab_size, N = static_cast<size_t>(B) * T;
    const int H = c.n_heads, K = c.n_kv_heads, h = c.head_dim;
    Loss out;

    Mat X(N, std::vector<double>(D));
    const auto& tok = get(w, "tok_emb.weight");
    for (size_t n = 0; n < N; ++n)
        for (size_t i = 0; i < D; ++i) {
            X[n][i] = tok[x[n] * D + i];
            if (c.pos == PosKind::learned) X[n][i] += get(w, "pos_emb.weight")[(n % T) * D + i];
        }

    for (int l = 0; l < c.n_layers; ++l) {
        const std::string p = "layers." + std::to_string(l);
        // ---- attention ----
        Mat q(N), k(N), v(N);
        for (size_t n = 0; n < N; ++n) {
            const auto xn = norm(c, w, p + ".attn_norm", X[n]);
            q[n] = linear(xn, get(w, p + ".attn.wq.weight"), opt(w, p + ".attn.wq.bias"), H * h);
            k[n] = linear(xn, get(w, p + ".attn.wk.weight"), opt(w, p + ".attn.wk.bias"), K * h);
            v[n] = linear(xn, get(w, p + ".attn.wv.weight"), opt(w, p + ".attn.wv.bias"), K * h);
            if (c.pos == PosKind::rope) {
                for (int j = 0; j < H; ++j) rope(c, q[n], j * h, static_cast<int>(n % T));
                for (int j = 0; j < K; ++j) rope(c, k[n], j * h, static_cast<int>(n % T));
            }
        }
        for (int b = 0; b < B; ++b)
            for (int t = 0; t < T; ++t) {
                std::vector<double> o(H * h, 0.0);
                for (int j = 0; j < H; ++j) {
                    const int kvh = j / (H / K);
                    std::vector<double> s(t + 1);
                    for (int u = 0; u <= t; ++u) {
                        double d = 0;
                        for (int i = 0; i < h; ++i)
                            d += q[b * T + t][j * h + i] * k[b * T + u][kvh * h + i];
                        s[u] = d / std::sqrt(static_cast<double>(h));
                    }
                    const double mx = *std::max_element(s.begin(), s.end());
                    double z = 0;
                    for (auto& e : s) z += e = std::exp(e - mx);
                    for (int u = 0; u <= t; ++u)
                        for (int i = 0; i < h; ++i)
                            o[j * h + i] += s[u] / z * v[b * T + u][kvh * h + i];
                }
                const auto a =
                    linear(o, get(w, p + ".attn.wo.weight"), opt(w, p + ".attn.wo.bias"), D);
                for (size_t i = 0; i < D; ++i) X[b * T + t][i] += a[i];
            }
        // ---- FFN ----
        if (!c.is_moe_layer(l)) {
            for (size_t n = 0; n < N; ++n) {
                const auto f =
                    dense_ffn(c, w, p + ".ffn", norm(c, w, p + ".ffn_norm", X[n]), c.d_ff);
                for (size_t i = 0; i < D; ++i) X[n][i] += f[i];
            }
            continue;
        }
        const MoeConfig& m = *c.moe;
        const int E = m.n_experts;
        const size_t F = c.d_ff;
        const bool topk = m.router != RouterKind::hash;
        const bool sigmoid = m.router == RouterKind::sigmoid_topk;
        const int kk = topk ? m.top_k : 1;
        const std::vector<double> no_bias;
        const std::vector<double>& bias =
            m.bias_update_rate > 0 ? get(w, p + ".moe.router.expert_bias") : no_bias;
        // Routing of every token first: the capacity admission looks at all of them.
        std::vector<double> count(E, 0.0), Pmean(E, 0.0);
        double zsum = 0;
        Mat xns(N);
        std::vector<std::vector<int>> idx(N);
        std::vector<std::vector<double>> wts(N);
        for (size_t n = 0; n < N; ++n) {
            xns[n] = norm(c, w, p + ".ffn_norm", X[n]);
            if (topk) {
                const auto r = linear(xns[n], get(w, p + ".moe.router.weight"), nullptr, E);
                std::vector<double> score;
                route_topk(m, r, bias, score, idx[n], wts[n]);
                const double mx = *std::max_element(r.begin(), r.end());
                double s = 0;
                for (double v2 : r) s += std::exp(v2 - mx);
                const double lse = mx + std::log(s);
                zsum += lse * lse;
                double ssum = 0;  // P_e's denominator: 1 for softmax, sum_j s_j for sigmoid
                for (int e = 0; e < E; ++e) ssum += score[e];
                for (int e = 0; e < E; ++e) Pmean[e] += score[e] / (sigmoid ? ssum : 1.0) / N;
            } else {
                idx[n] = {hash_expert(x[n], l, E)};
                wts[n] = {1.0};
            }
            for (int e : idx[n]) count[e] += 1;  // f_e: before any dropping
        }
        // MODEL.md 2: capacity ceil(((c N) k) / E); slot j = 0..k-1, then token n = 0..N-1.
        std::vector<std::vector<bool>> kept(N, std::vector<bool>(kk, true));
        if (training && m.capacity_factor > 0) {
            const double cap = std::ceil(((m.capacity_factor * N) * kk) / E);
            std::vector<double> admitted(E, 0.0);
            for (int j = 0; j < kk; ++j)
                for (size_t n = 0; n < N; ++n) {
                    const int e = idx[n][j];
                    kept[n][j] = admitted[e] < cap;
                    admitted[e] += 1;
                    if (!kept[n][j] && dropped) ++*dropped;
                }
        }
        Mat outs(N);
        for (size_t n = 0; n < N; ++n) {
            std::vector<double> yv(D, 0.0);
            for (int j = 0; j < kk; ++j) {
                if (!kept[n][j]) continue;  // contributes nothing; no renormalisation again
                const size_t e = idx[n][j];
                const auto f =
                    ffn(c, xns[n], opt(w, p + ".moe.experts.w_gate"),
                        get(w, p + ".moe.experts.w_up"), get(w, p + ".moe.experts.w_down"), nullptr,
                        nullptr, nullptr, F, e * F * D, e * D * F);
                for (size_t i = 0; i < D; ++i) yv[i] += wts[n][j] * f[i];
            }
            if (m.n_shared_experts > 0) {
                const auto f = dense_ffn(c, w, p + ".moe.shared", xns[n], m.n_shared_experts * F);
                for (size_t i = 0; i < D; ++i) yv[i] += f[i];
            }
            outs[n] = yv;
        }
        for (size_t n = 0; n < N; ++n)
            for (size_t i = 0; i < D; ++i) X[n][i] += outs[n][i];
        if (topk) {
            double a = 0;
            for (int e = 0; e < E; ++e) a += count[e] / (static_cast<double>(N) * kk) * Pmean[e];
            out.aux += m.aux_loss_alpha * E * a;
            out.z += m.z_loss_alpha * zsum / N;
        }
    }

    const auto& Wout = c.tie_embeddings ? tok : get(w, "lm_head.weight");
    double ce = 0;
    size_t counted = 0;
    if (logits_out) logits_out->assign(N * V, 0.0);
    for (size_t n = 0; n < N; ++n) {
        const auto xf = norm(c, w, "norm_f", X[n]);
        const auto lg = linear(xf, Wout, nullptr, V);
        if (logits_out) std::copy(lg.begin(), lg.end(), logits_out->begin() + n * V);
        if (y[n] < 0) continue;
        const double mx = *std::max_element(lg.begin(), lg.end());
        double s = 0;
        for (double v2 : lg) s += std::exp(v2 - mx);
        ce += mx + std::log(s) - lg[y[n]];
        ++counted;
    }
    out.ce = counted ? ce / counted : 0.0;
    out.loss = out.ce + out.aux + out.z;
    return out;
}

Weights weights_from(const std::vector<ParamInfo>& params, const std::vector<float>& flat) {
    Weights w;
    for (const auto& p : params)
        w[p.name] =
            std::vector<double>(flat.begin() + p.offset, flat.begin() + p.offset + p.numel());
    return w;
}

ModelConfig small_config() {
    return sized_config(32, 16, 2, 4, 2, 24, 16);
}

ModelConfig with_moe(ModelConfig c, int n_experts, int top_k, int first_layer) {
    MoeConfig m;
    m.n_experts = n_experts;
    m.top_k = top_k;
    m.first_layer = first_layer;
    c.moe = m;
    return c;
}

void randomize_weights(Model& m, uint64_t seed) {
    m.init_weights(seed);
    std::vector<float> flat = m.get_flat(m.params_flat());
    std::mt19937_64 rng(seed ^ 0x5eed);
    std::normal_distribution<double> nd(0.0, 1.0);
    for (const auto& p : m.params()) {
        const bool bias = p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0;
        for (int64_t i = p.offset; i < p.offset + p.numel(); ++i) {
            float& v = flat[static_cast<size_t>(i)];
            if (p.decay)
                v *= 5.0f;
            else
                v = static_cast<float>((bias ? 0.0 : 1.0) + 0.2 * nd(rng));
        }
    }
    m.set_flat(m.params_flat(), flat);
}

Batch random_batch(int vocab, int B, int T, uint64_t seed, int ignore_every) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
    Batch b;
    for (int i = 0; i < B * T; ++i) {
        b.x.push_back(tok(rng));
        b.y.push_back(ignore_every > 0 && i % ignore_every == ignore_every - 1 ? -1 : tok(rng));
    }
    return b;
}

}  // namespace moetrain::refmodel
