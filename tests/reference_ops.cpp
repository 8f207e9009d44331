// Float64 reference ops (see reference_ops.h): the definitions of api/moetrain/device.h and
// MODEL.md written as the plainest loops, used as ground truth by the op tests.
#include "reference_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "shared/mt_math.h"

namespace moetrain::ref {

namespace {
constexpr double kPi = 3.14159265358979323846;

// log(sum(exp(x[0..n)))) computed stably.
double logsumexp(const double* x, int64_t n) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - mx);
    return mx + std::log(s);
}

// Ids 0..n-1 ordered by descending p, ties to the lower id.
std::vector<int32_t> order_by_prob(const double* p, int64_t n) {
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    return order;
}
}  // namespace

double round_to(double v, DType dtype) {
    float f = static_cast<float>(v);
    switch (dtype) {
        case DType::f32:
            return f;
        case DType::bf16:
            return bf16_to_f32(f32_to_bf16(f));
        case DType::f16:
            return f16_to_f32(f32_to_f16(f));
        case DType::i32:
            return static_cast<double>(static_cast<int32_t>(f));
        case DType::u8:
            return static_cast<double>(static_cast<uint8_t>(static_cast<int32_t>(f)));
    }
    return v;
}

Vec rounded(Vec v, DType dtype) {
    for (double& x : v) x = round_to(x, dtype);
    return v;
}

// ---- dense algebra ----------------------------------------------------------------------

Gemm gemm_dims(const GemmArgs& a) {
    return Gemm{a.ta,  a.tb,  a.m,   a.n,     a.k,        a.alpha,    a.beta,
                a.lda, a.ldb, a.ldc, a.batch, a.stride_a, a.stride_b, a.stride_c};
}

void gemm(const Gemm& g, const Vec& a, const Vec& b, Vec& c) {
    for (int64_t i = 0; i < g.batch; ++i) {
        const double* A = a.data() + i * g.stride_a;
        const double* Bm = b.data() + i * g.stride_b;
        double* C = c.data() + i * g.stride_c;
        for (int64_t r = 0; r < g.m; ++r)
            for (int64_t col = 0; col < g.n; ++col) {
                double acc = 0;
                for (int64_t p = 0; p < g.k; ++p) {
                    double av = g.ta == Trans::N ? A[r * g.lda + p] : A[p * g.lda + r];
                    double bv = g.tb == Trans::N ? Bm[p * g.ldb + col] : Bm[col * g.ldb + p];
                    acc += av * bv;
                }
                double& cv = C[r * g.ldc + col];
                cv = g.beta == 0 ? g.alpha * acc : g.alpha * acc + g.beta * cv;
            }
    }
}

void gemm_grouped(const Gemm& g, const Vec& a, const Vec& b, Vec& c, const IVec& rows,
                  GroupDim dim) {
    auto store = [&](double& cv, double acc) {
        cv = g.beta == 0 ? g.alpha * acc : g.alpha * acc + g.beta * cv;
    };
    int64_t o = 0;
    for (size_t i = 0; i < rows.size(); o += rows[i], ++i) {
        const auto gi = static_cast<int64_t>(i);
        if (dim == GroupDim::m) {  // C[o:o+r, :] = alpha A[o:o+r, :] @ op(B_i) + beta C[o:o+r, :]
            const double* Bi = b.data() + gi * g.stride_b;
            for (int64_t r = o; r < o + rows[i]; ++r)
                for (int64_t col = 0; col < g.n; ++col) {
                    double acc = 0;
                    for (int64_t p = 0; p < g.k; ++p)
                        acc += a[r * g.lda + p] *
                               (g.tb == Trans::N ? Bi[p * g.ldb + col] : Bi[col * g.ldb + p]);
                    store(c[r * g.ldc + col], acc);
                }
        } else {  // C_i = alpha A[o:o+r, :]^T @ B[o:o+r, :] + beta C_i
            for (int64_t r = 0; r < g.m; ++r)
                for (int64_t col = 0; col < g.n; ++col) {
                    double acc = 0;
                    for (int64_t p = o; p < o + rows[i]; ++p)
                        acc += a[p * g.lda + r] * b[p * g.ldb + col];
                    store(c[gi * g.stride_c + r * g.ldc + col], acc);
                }
        }
    }
}

void add(Vec& out, const Vec& a, const Vec& b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void axpby(Vec& y, double alpha, const Vec& x, double beta, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i] + beta * y[i];
}

void add_bias(Vec& y, const Vec& bias, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += bias[c];
}

void bias_grad(Vec& dbias, const Vec& dy, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) dbias[c] += dy[r * cols + c];
}

// ---- embedding ----------------------------------------------------------------------------

void embedding_fwd(Vec& out, const Vec& table, const IVec& ids, int64_t n, int64_t dim,
                   bool accumulate) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < dim; ++c) {
            double v = table[ids[i] * dim + c];
            out[i * dim + c] = accumulate ? out[i * dim + c] + v : v;
        }
}

void embedding_bwd(Vec& dtable, const Vec& dout, const IVec& ids, int64_t n, int64_t dim) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < dim; ++c) dtable[ids[i] * dim + c] += dout[i * dim + c];
}

// ---- normalisation ------------------------------------------------------------------------

void rmsnorm_fwd(Vec& y, Vec& rstd, const Vec& x, const Vec& g, int64_t rows, int64_t dim,
                 double eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x.data() + r * dim;
        double ms = 0;
        for (int64_t c = 0; c < dim; ++c) ms += xr[c] * xr[c];
        double rs = 1.0 / std::sqrt(ms / static_cast<double>(dim) + eps);
        rstd[r] = rs;
        for (int64_t c = 0; c < dim; ++c) y[r * dim + c] = xr[c] * rs * g[c];
    }
}

void rmsnorm_bwd(Vec& dx, Vec& dg, const Vec& dy, const Vec& x, const Vec& g, const Vec& rstd,
                 int64_t rows, int64_t dim, bool accumulate_dx) {
    for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x.data() + r * dim;
        const double* dyr = dy.data() + r * dim;
        double rs = rstd[r];
        double dot = 0;  // sum_c dy_c g_c x_c
        for (int64_t c = 0; c < dim; ++c) dot += dyr[c] * g[c] * xr[c];
        for (int64_t c = 0; c < dim; ++c) {
            double d = rs * g[c] * dyr[c] - xr[c] * rs * rs * rs * dot / static_cast<double>(dim);
            dx[r * dim + c] = accumulate_dx ? dx[r * dim + c] + d : d;
            dg[c] += dyr[c] * xr[c] * rs;
        }
    }
}

void layernorm_fwd(Vec& y, Vec& mean, Vec& rstd, const Vec& x, const Vec& g, const Vec& b,
                   int64_t rows, int64_t dim, double eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x.data() + r * dim;
        double mu = 0;
        for (int64_t c = 0; c < dim; ++c) mu += xr[c];
        mu /= static_cast<double>(dim);
        double var = 0;
        for (int64_t c = 0; c < dim; ++c) var += (xr[c] - mu) * (xr[c] - mu);
        var /= static_cast<double>(dim);
        double rs = 1.0 / std::sqrt(var + eps);
        mean[r] = mu;
        rstd[r] = rs;
        for (int64_t c = 0; c < dim; ++c)
            y[r * dim + c] = (xr[c] - mu) * rs * g[c] + (b.empty() ? 0.0 : b[c]);
    }
}

void layernorm_bwd(Vec& dx, Vec& dg, Vec& db, const Vec& dy, const Vec& x, const Vec& g,
                   const Vec& mean, const Vec& rstd, int64_t rows, int64_t dim,
                   bool accumulate_dx) {
    const double nd = static_cast<double>(dim);
    for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x.data() + r * dim;
        const double* dyr = dy.data() + r * dim;
        double mean_dxh = 0, mean_dxh_xh = 0;  // means of dxhat and dxhat * xhat
        for (int64_t c = 0; c < dim; ++c) {
            double xh = (xr[c] - mean[r]) * rstd[r];
            mean_dxh += dyr[c] * g[c] / nd;
            mean_dxh_xh += dyr[c] * g[c] * xh / nd;
        }
        for (int64_t c = 0; c < dim; ++c) {
            double xh = (xr[c] - mean[r]) * rstd[r];
            double d = rstd[r] * (dyr[c] * g[c] - mean_dxh - xh * mean_dxh_xh);
            dx[r * dim + c] = accumulate_dx ? dx[r * dim + c] + d : d;
            dg[c] += dyr[c] * xh;
            if (!db.empty()) db[c] += dyr[c];
        }
    }
}

// ---- positions ----------------------------------------------------------------------------

void rope(Vec& x, int64_t B, int64_t T, int64_t nh, int64_t hd, double theta, int64_t pos0,
          bool inverse) {
    const int64_t half = hd / 2;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < nh; ++h) {
                double* v = x.data() + ((b * T + t) * nh + h) * hd;
                for (int64_t i = 0; i < half; ++i) {
                    // MODEL.md fixes the angle as a float32 product (Hugging Face convention).
                    double ang = mt_rope_angle(static_cast<float>(theta), static_cast<int>(i),
                                               static_cast<int>(hd), static_cast<int>(pos0 + t));
                    double c = std::cos(ang), s = inverse ? -std::sin(ang) : std::sin(ang);
                    double x0 = v[i], x1 = v[i + half];
                    v[i] = x0 * c - x1 * s;
                    v[i + half] = x1 * c + x0 * s;
                }
            }
}

// ---- KV cache -------------------------------------------------------------------------------

void kv_append(Vec& cache, const Vec& rows, int64_t B, int64_t T, int64_t S, int64_t row_len,
               int64_t p) {
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t c = 0; c < row_len; ++c)
                cache[(b * S + p + t) * row_len + c] = rows[(b * T + t) * row_len + c];
}

// ---- attention ----------------------------------------------------------------------------

namespace {
// Softmax probabilities p[u] (u < Tk; 0 for masked keys) of query (b, t, head j), and its lse.
double attention_probs(Vec& p, const Vec& q, const Vec& k, const AttnDims& d, double scale,
                       int64_t b, int64_t t, int64_t j) {
    const int64_t kvh = j / (d.H / d.K);
    const int64_t last = t + d.Tk - d.Tq;  // absolute position of the query
    const double* qv = q.data() + ((b * d.Tq + t) * d.H + j) * d.hd;
    Vec s(static_cast<size_t>(last + 1));
    for (int64_t u = 0; u <= last; ++u) {
        const double* kv = k.data() + ((b * d.S + u) * d.K + kvh) * d.hd;
        double dot = 0;
        for (int64_t c = 0; c < d.hd; ++c) dot += qv[c] * kv[c];
        s[u] = dot * scale;
    }
    double l = logsumexp(s.data(), last + 1);
    p.assign(static_cast<size_t>(d.Tk), 0.0);
    for (int64_t u = 0; u <= last; ++u) p[u] = std::exp(s[u] - l);
    return l;
}
}  // namespace

void attention_fwd(Vec& o, Vec& lse, const Vec& q, const Vec& k, const Vec& v, const AttnDims& d,
                   double scale) {
    Vec p;
    for (int64_t b = 0; b < d.B; ++b)
        for (int64_t j = 0; j < d.H; ++j)
            for (int64_t t = 0; t < d.Tq; ++t) {
                const int64_t kvh = j / (d.H / d.K);
                lse[(b * d.H + j) * d.Tq + t] = attention_probs(p, q, k, d, scale, b, t, j);
                double* ov = o.data() + ((b * d.Tq + t) * d.H + j) * d.hd;
                for (int64_t c = 0; c < d.hd; ++c) {
                    double acc = 0;
                    for (int64_t u = 0; u < d.Tk; ++u)
                        acc += p[u] * v[((b * d.S + u) * d.K + kvh) * d.hd + c];
                    ov[c] = acc;
                }
            }
}

void attention_bwd(Vec& dq, Vec& dk, Vec& dv, const Vec& dout, const Vec& q, const Vec& k,
                   const Vec& v, const AttnDims& d, double scale) {
    std::fill(dq.begin(), dq.end(), 0.0);
    std::fill(dk.begin(), dk.end(), 0.0);
    std::fill(dv.begin(), dv.end(), 0.0);
    Vec p, dp(static_cast<size_t>(d.Tk));
    for (int64_t b = 0; b < d.B; ++b)
        for (int64_t j = 0; j < d.H; ++j)
            for (int64_t t = 0; t < d.Tq; ++t) {
                const int64_t kvh = j / (d.H / d.K);
                attention_probs(p, q, k, d, scale, b, t, j);
                const int64_t qi = ((b * d.Tq + t) * d.H + j) * d.hd;
                double pdp = 0;  // sum_u p_u dp_u
                for (int64_t u = 0; u < d.Tk; ++u) {
                    const int64_t ki = ((b * d.S + u) * d.K + kvh) * d.hd;
                    double acc = 0;
                    for (int64_t c = 0; c < d.hd; ++c) {
                        acc += dout[qi + c] * v[ki + c];
                        dv[ki + c] += p[u] * dout[qi + c];
                    }
                    dp[u] = acc;
                    pdp += p[u] * acc;
                }
                for (int64_t u = 0; u < d.Tk; ++u) {
                    const int64_t ki = ((b * d.S + u) * d.K + kvh) * d.hd;
                    double ds = p[u] * (dp[u] - pdp) * scale;
                    for (int64_t c = 0; c < d.hd; ++c) {
                        dq[qi + c] += ds * k[ki + c];
                        dk[ki + c] += ds * q[qi + c];
                    }
                }
            }
}

// ---- activations --------------------------------------------------------------------------

double act(Act a, double z) {
    switch (a) {
        case Act::gelu: {
            double u = std::sqrt(2.0 / kPi) * (z + 0.044715 * z * z * z);
            return 0.5 * z * (1.0 + std::tanh(u));
        }
        case Act::relu:
            return z > 0 ? z : 0.0;
        case Act::silu:
            return z / (1.0 + std::exp(-z));
    }
    return 0;
}

double act_grad(Act a, double z) {
    switch (a) {
        case Act::gelu: {
            double k0 = std::sqrt(2.0 / kPi);
            double u = k0 * (z + 0.044715 * z * z * z);
            double t = std::tanh(u);
            return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * k0 * (1.0 + 3.0 * 0.044715 * z * z);
        }
        case Act::relu:
            return z > 0 ? 1.0 : 0.0;
        case Act::silu: {
            double s = 1.0 / (1.0 + std::exp(-z));
            return s * (1.0 + z * (1.0 - s));
        }
    }
    return 0;
}

void act_fwd(Act a, Vec& y, const Vec& x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = act(a, x[i]);
}

void act_bwd(Act a, Vec& dx, const Vec& dy, const Vec& x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * act_grad(a, x[i]);
}

void swiglu_fwd(Vec& h, const Vec& gate, const Vec& up, int64_t n) {
    for (int64_t i = 0; i < n; ++i) h[i] = act(Act::silu, gate[i]) * up[i];
}

void swiglu_bwd(Vec& dgate, Vec& dup, const Vec& dh, const Vec& gate, const Vec& up, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        dgate[i] = dh[i] * up[i] * act_grad(Act::silu, gate[i]);
        dup[i] = dh[i] * act(Act::silu, gate[i]);
    }
}

void softmax(Vec& y, const Vec& x, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        double l = logsumexp(x.data() + r * cols, cols);
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = std::exp(x[r * cols + c] - l);
    }
}

// ---- MoE routing --------------------------------------------------------------------------

void router_fwd(Vec& probs, Vec& lse, IVec& topk_idx, Vec& topk_w, const Vec& logits,
                const Vec& bias, int64_t N, int64_t E, int64_t k, const RouterArgs& r) {
    softmax(probs, logits, N, E);
    Vec q(static_cast<size_t>(E));
    for (int64_t n = 0; n < N; ++n) {
        double* p = probs.data() + n * E;
        lse[n] = logsumexp(logits.data() + n * E, E);
        if (r.sigmoid)
            for (int64_t e = 0; e < E; ++e) p[e] = 1.0 / (1.0 + std::exp(-logits[n * E + e]));
        for (int64_t e = 0; e < E; ++e) q[e] = p[e] + (bias.empty() ? 0.0 : bias[e]);
        auto order = order_by_prob(q.data(), E);
        double s = 0;
        for (int64_t j = 0; j < k; ++j) s += p[order[j]];
        for (int64_t j = 0; j < k; ++j) {
            topk_idx[n * k + j] = order[j];
            double w = p[order[j]];
            topk_w[n * k + j] = (r.norm_topk ? w / s : w) * r.scaling;
        }
    }
}

void router_bwd(Vec& dlogits, const Vec& dtopk_w, const Vec& probs, const Vec& lse,
                const Vec& logits, const IVec& topk_idx, const Vec& topk_w, const IVec& counts,
                int64_t N, int64_t E, int64_t k, const RouterArgs& r, double aux_alpha,
                double z_alpha, double scale) {
    const double nN = static_cast<double>(N), nE = static_cast<double>(E), a = r.scaling;
    Vec dp(static_cast<size_t>(E));
    for (int64_t n = 0; n < N; ++n) {
        const double* p = probs.data() + n * E;
        // d/dp of sum_j dw_j * w_j(p), w_j = a p_j / s (norm_topk) or a p_j.
        std::fill(dp.begin(), dp.end(), 0.0);
        double s = 0, dot = 0;
        for (int64_t j = 0; j < k; ++j) {
            s += p[topk_idx[n * k + j]];
            dot += dtopk_w[n * k + j] * topk_w[n * k + j];
        }
        for (int64_t j = 0; j < k; ++j) {
            double dw = dtopk_w[n * k + j];
            dp[topk_idx[n * k + j]] = r.norm_topk ? (a * dw - dot) / s : a * dw;
        }
        // d/dp of scale * aux, f_e constant; P_e's term is p_e (softmax) or s_e / sum_j s_j.
        double S = 0, fs = 0;
        for (int64_t e = 0; e < E; ++e) {
            double f = counts[e] / (nN * static_cast<double>(k));
            S += p[e];
            fs += f * p[e];
        }
        for (int64_t e = 0; e < E; ++e) {
            double f = counts[e] / (nN * static_cast<double>(k));
            double dP = r.sigmoid ? f / S - fs / (S * S) : f;
            dp[e] += scale * aux_alpha * nE * dP / nN;
        }
        // Through the softmax or the sigmoid, plus the z-loss term d(lse^2)/dlogit = 2 lse
        // softmax(logits).
        double pdp = 0;
        for (int64_t e = 0; e < E; ++e) pdp += p[e] * dp[e];
        for (int64_t e = 0; e < E; ++e) {
            const double sm = std::exp(logits[n * E + e] - lse[n]);
            const double through = r.sigmoid ? p[e] * (1.0 - p[e]) * dp[e] : p[e] * (dp[e] - pdp);
            dlogits[n * E + e] = through + scale * z_alpha * 2.0 * lse[n] * sm / nN;
        }
    }
}

void router_aux_loss(Vec& out, const Vec& probs, const Vec& lse, const IVec& counts, int64_t N,
                     int64_t E, int64_t k, const RouterArgs& r, double aux_alpha, double z_alpha) {
    const double nN = static_cast<double>(N);
    Vec row_sum(static_cast<size_t>(N), 1.0);
    if (r.sigmoid)
        for (int64_t n = 0; n < N; ++n) {
            row_sum[n] = 0;
            for (int64_t e = 0; e < E; ++e) row_sum[n] += probs[n * E + e];
        }
    double aux = 0;
    for (int64_t e = 0; e < E; ++e) {
        double f = counts[e] / (nN * static_cast<double>(k));
        double P = 0;
        for (int64_t n = 0; n < N; ++n) P += probs[n * E + e] / row_sum[n];
        aux += f * P / nN;
    }
    double z = 0;
    for (int64_t n = 0; n < N; ++n) z += lse[n] * lse[n];
    out[0] += aux_alpha * static_cast<double>(E) * aux;
    out[1] += z_alpha * z / nN;
}

void hash_route(IVec& topk_idx, const IVec& ids, int64_t N, int64_t layer, int64_t E) {
    for (int64_t n = 0; n < N; ++n) {
        // MODEL.md 2, written out again here so that mt_math.h is checked against the text.
        uint32_t z = static_cast<uint32_t>(ids[n]) + 0x9E3779B9u * static_cast<uint32_t>(layer + 1);
        z ^= z >> 16;
        z *= 0x85EBCA6Bu;
        z ^= z >> 13;
        z *= 0xC2B2AE35u;
        z ^= z >> 16;
        topk_idx[n] = static_cast<int32_t>(z % static_cast<uint32_t>(E));
    }
}

void moe_capacity(IVec& kept_idx, IVec& counts, const IVec& topk_idx, const IVec& offsets,
                  int64_t N, int64_t k, int64_t E, int64_t capacity) {
    // MODEL.md 2: every token's first choice, then every second choice, ...; an expert that
    // already admitted `capacity` selections (here and, before this rank, elsewhere) drops.
    std::fill(counts.begin(), counts.begin() + E, 0);
    for (int64_t j = 0; j < k; ++j)
        for (int64_t n = 0; n < N; ++n) {
            const int32_t e = topk_idx[n * k + j];
            const int64_t earlier = counts[e] + (offsets.empty() ? 0 : offsets[j * E + e]);
            kept_idx[n * k + j] = earlier < capacity ? e : -1;
            counts[e]++;
        }
}

void moe_capacity_shares(IVec& shares, const IVec& topk_idx, int64_t N, int64_t k, int64_t E,
                         int64_t rank, int64_t ranks) {
    // Rank q's offsets count the selections of other ranks before its own in priority order:
    // this rank's of a higher slot (q != rank), and of the same slot when this rank comes
    // first (rank < q). Counted selection by selection, straight from that definition.
    for (int64_t q = 0; q < ranks; ++q)
        for (int64_t j = 0; j < k; ++j)
            for (int64_t e = 0; e < E; ++e) {
                int32_t v = 0;
                for (int64_t jj = 0; jj < k; ++jj)
                    for (int64_t n = 0; n < N; ++n) {
                        if (topk_idx[n * k + jj] != e) continue;
                        v += (q != rank && jj < j) || (rank < q && jj == j);
                    }
                shares[(q * k + j) * E + e] = v;
            }
}

void moe_sort(IVec& counts, IVec& row_token, IVec& slot_row, const IVec& topk_idx, int64_t N,
              int64_t k, int64_t E) {
    std::fill(counts.begin(), counts.begin() + E, 0);
    for (int64_t s = 0; s < N * k; ++s)
        if (topk_idx[s] >= 0) counts[topk_idx[s]]++;
    IVec next(static_cast<size_t>(E), 0);
    for (int64_t e = 1; e < E; ++e) next[e] = next[e - 1] + counts[e - 1];
    int64_t total = 0;
    for (int64_t e = 0; e < E; ++e) total += counts[e];
    for (int64_t r = total; r < N * k; ++r) row_token[r] = 0;
    for (int64_t s = 0; s < N * k; ++s) {
        if (topk_idx[s] < 0) {
            slot_row[s] = -1;
            continue;
        }
        int32_t r = next[topk_idx[s]]++;
        row_token[r] = static_cast<int32_t>(s / k);
        slot_row[s] = r;
    }
}

void gather_rows(Vec& dst, const Vec& src, const IVec& index, int64_t R, int64_t dim) {
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < dim; ++c) dst[r * dim + c] = src[index[r] * dim + c];
}

void moe_combine(Vec& y, const Vec& rows, const IVec& slot_row, const Vec& w, int64_t N, int64_t k,
                 int64_t dim, bool accumulate) {
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < dim; ++c) {
            double acc = 0;
            for (int64_t j = 0; j < k; ++j)
                if (slot_row[n * k + j] >= 0)
                    acc += (w.empty() ? 1.0 : w[n * k + j]) * rows[slot_row[n * k + j] * dim + c];
            y[n * dim + c] = accumulate ? y[n * dim + c] + acc : acc;
        }
}

void moe_combine_bwd(Vec& drows, Vec& dw, const Vec& dy, const Vec& rows, const IVec& slot_row,
                     const Vec& w, int64_t N, int64_t k, int64_t dim) {
    for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < k; ++j) {
            const int64_t r = slot_row[n * k + j];
            if (r < 0) {  // dropped: no row, no weight gradient
                if (!dw.empty()) dw[n * k + j] = 0;
                continue;
            }
            double wj = w.empty() ? 1.0 : w[n * k + j];
            double dot = 0;
            for (int64_t c = 0; c < dim; ++c) {
                drows[r * dim + c] = wj * dy[n * dim + c];
                dot += dy[n * dim + c] * rows[r * dim + c];
            }
            if (!dw.empty()) dw[n * k + j] = dot;
        }
}

void add_counts(IVec& acc, const IVec& counts, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] += counts[i];
}

void expert_bias_update(Vec& bias, const IVec& counts, int64_t E, double rate) {
    double total = 0;
    for (int64_t e = 0; e < E; ++e) total += counts[e];
    const double mean = total / static_cast<double>(E);
    for (int64_t e = 0; e < E; ++e) {
        const double d = mean - counts[e];
        const double sign = (d > 0) - (d < 0);
        bias[e] =
            static_cast<float>(static_cast<double>(static_cast<float>(bias[e])) + rate * sign);
    }
}

// ---- loss ---------------------------------------------------------------------------------

void cross_entropy(Vec& losses, Vec& grad, const Vec& logits, const IVec& targets, int64_t N,
                   int64_t V, double grad_scale) {
    for (int64_t n = 0; n < N; ++n) {
        const double* l = logits.data() + n * V;
        const int32_t t = targets[n];
        double lse = logsumexp(l, V);
        losses[n] = t < 0 ? 0.0 : lse - l[t];
        if (grad_scale == 0) continue;
        for (int64_t c = 0; c < V; ++c)
            grad[n * V + c] =
                t < 0 ? 0.0 : grad_scale * (std::exp(l[c] - lse) - (c == t ? 1.0 : 0.0));
    }
}

// ---- reductions ---------------------------------------------------------------------------

void sum(Vec& out, const Vec& x, int64_t n, double scale, bool accumulate) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    out[0] = (accumulate ? out[0] : 0.0) + scale * s;
}

void sum_squares(Vec& out, const Vec& x, int64_t n, bool accumulate) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
    out[0] = (accumulate ? out[0] : 0.0) + s;
}

// ---- optimizers ---------------------------------------------------------------------------

double clip_coef(double gnorm_sq, double grad_scale, double clip) {
    double norm = std::sqrt(gnorm_sq) * grad_scale;
    return (clip > 0 && norm > clip) ? clip / (norm + 1e-6) : 1.0;
}

void adamw(Vec& p, const Vec& g, Vec& m, Vec& v, int64_t n, const AdamWArgs& a, double gnorm_sq,
           double clip, double grad_scale) {
    const double c = clip_coef(gnorm_sq, grad_scale, clip);
    const double b1 = a.b1, b2 = a.b2;
    for (int64_t i = 0; i < n; ++i) {
        double gi = g[i] * grad_scale * c;
        m[i] = b1 * m[i] + (1 - b1) * gi;
        v[i] = b2 * v[i] + (1 - b2) * gi * gi;
        double mhat = m[i] / a.bc1, vhat = v[i] / a.bc2;
        p[i] -= static_cast<double>(a.lr) * (mhat / (std::sqrt(vhat) + static_cast<double>(a.eps)) +
                                             static_cast<double>(a.wd) * p[i]);
    }
}

void sgd(Vec& p, const Vec& g, int64_t n, double lr, double gnorm_sq, double clip,
         double grad_scale) {
    const double c = clip_coef(gnorm_sq, grad_scale, clip);
    for (int64_t i = 0; i < n; ++i) p[i] -= lr * g[i] * grad_scale * c;
}

// ---- 8-bit AdamW --------------------------------------------------------------------------

namespace {
const std::vector<double>& qmap_table(bool is_signed) {
    auto build = [](bool sgn) {
        std::vector<double> data;
        for (int i = 0; i < 7; ++i) {
            const int items = sgn ? (1 << i) : (1 << (i + 1));  // linspace(0.1, 1, items + 1)
            for (int j = 0; j < items; ++j) {
                const double lo = 0.1 + 0.9 * j / items, hi = 0.1 + 0.9 * (j + 1) / items;
                const double value = std::pow(10.0, i - 6) * ((lo + hi) / 2);
                data.push_back(value);
                if (sgn) data.push_back(-value);
            }
        }
        data.push_back(0.0);
        data.push_back(1.0);
        std::sort(data.begin(), data.end());
        for (double& x : data) x = static_cast<float>(x);
        return data;
    };
    static const std::vector<double> s = build(true), u = build(false);
    return is_signed ? s : u;
}
}  // namespace

double qmap(bool is_signed, int code) {
    return qmap_table(is_signed).at(static_cast<size_t>(code));
}

int qmap_nearest(bool is_signed, double x) {
    const std::vector<double>& map = qmap_table(is_signed);
    int best = 0;
    for (int c = 1; c < static_cast<int>(map.size()); ++c)
        if (std::fabs(map[c] - x) < std::fabs(map[best] - x)) best = c;
    return best;
}

bool code_within_slack(bool is_signed, int code, double x, double slack) {
    return code >= qmap_nearest(is_signed, x - slack) && code <= qmap_nearest(is_signed, x + slack);
}

void adamw8bit(Vec& p, const Vec& g, Quantized8& s, int64_t n, const AdamWArgs& a, double gnorm_sq,
               double clip, double grad_scale) {
    const double c = clip_coef(gnorm_sq, grad_scale, clip), u16 = 16.0 / 16777216.0;
    const double b1 = a.b1, b2 = a.b2;
    s.m_x.assign(static_cast<size_t>(n), 0.0);
    s.v_x = s.m_slack = s.v_slack = s.m_x;
    for (int64_t i0 = 0; i0 < n; i0 += 256) {
        const int64_t b = i0 / 256, i1 = std::min(n, i0 + 256);
        Vec m_terms(256), v_terms(256);
        double m_max = 0, v_max = 0;
        for (int64_t i = i0; i < i1; ++i) {
            const double gi = g[i] * grad_scale * c;
            const double m_old = qmap(true, s.m_codes[i]) * s.m_absmax[b];
            const double v_old = qmap(false, s.v_codes[i]) * s.v_absmax[b];
            const double m = b1 * m_old + (1 - b1) * gi, v = b2 * v_old + (1 - b2) * gi * gi;
            m_terms[i - i0] = std::fabs(b1 * m_old) + std::fabs((1 - b1) * gi) + std::fabs(m);
            v_terms[i - i0] = b2 * v_old + (1 - b2) * gi * gi + v;
            const double mhat = m / a.bc1, vhat = v / a.bc2;
            const double lr = a.lr, eps = a.eps, wd = a.wd;
            p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * p[i]);
            s.m_x[i] = m;
            s.v_x[i] = v;
            m_max = std::max(m_max, std::fabs(m));
            v_max = std::max(v_max, v);
        }
        s.m_absmax[b] = m_max;
        s.v_absmax[b] = v_max;
        for (int64_t i = i0; i < i1; ++i) {
            if (m_max > 0) {
                s.m_x[i] /= m_max;
                s.m_slack[i] = u16 * (m_terms[i - i0] / m_max + std::fabs(s.m_x[i]));
            }
            if (v_max > 0) {
                s.v_x[i] /= v_max;
                s.v_slack[i] = u16 * (v_terms[i - i0] / v_max + s.v_x[i]);
            }
            s.v_codes[i] = static_cast<uint8_t>(qmap_nearest(false, s.v_x[i]));
            // A v that rounds to 0 takes m to 0 as well (device.h).
            s.m_codes[i] =
                static_cast<uint8_t>(s.v_codes[i] == 0 ? 127 : qmap_nearest(true, s.m_x[i]));
        }
    }
}

// ---- sampling -----------------------------------------------------------------------------

void sample(IVec& out_ids, const Vec& logits, int64_t B, int64_t V, const SampleArgs& s) {
    for (int64_t b = 0; b < B; ++b) {
        const double* l = logits.data() + b * V;
        if (s.temperature == 0) {
            int64_t best = 0;
            for (int64_t i = 1; i < V; ++i)
                if (l[i] > l[best]) best = i;
            out_ids[b] = static_cast<int32_t>(best);
            continue;
        }
        Vec z(l, l + V);
        for (auto& x : z) x /= static_cast<double>(s.temperature);
        Vec p(static_cast<size_t>(V));
        softmax(p, z, 1, V);
        auto order = order_by_prob(p.data(), V);
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
        double total = 0;
        for (int64_t i = 0; i < keep; ++i) total += p[order[i]];
        const double u = mt_philox_uniform(s.seed, s.step, static_cast<uint64_t>(b));
        int32_t pick = order[keep - 1];
        double cum = 0;
        for (int64_t i = 0; i < keep; ++i) {
            cum += p[order[i]] / total;
            if (cum > u) {
                pick = order[i];
                break;
            }
        }
        out_ids[b] = pick;
    }
}

}  // namespace moetrain::ref
