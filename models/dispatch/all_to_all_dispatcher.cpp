// The all-to-all token dispatcher (all_to_all_dispatcher.h): its buffers, the exchange of the
// counts, and the plain (blocking) exchange of the rows.
#include "dispatch/all_to_all_dispatcher.h"

#include <algorithm>

#include "moetrain/comm.h"

namespace moetrain {
namespace {

int64_t total(const std::vector<int64_t>& v) {
    int64_t t = 0;
    for (int64_t x : v) t += x;
    return t;
}

std::vector<int64_t> firsts(const std::vector<int64_t>& v) {
    std::vector<int64_t> f(v.size(), 0);
    for (size_t i = 1; i < v.size(); ++i) f[i] = f[i - 1] + v[i - 1];
    return f;
}

// Rows [off, off + n) of a tensor of width w.
Tensor rows_of(const Tensor& t, int64_t off, int64_t n, int64_t w) {
    return t ? t.view(off * w, {n, w}) : Tensor{};
}

// Per-rank row counts as element counts of rows of width w (what all_to_all_v takes).
std::vector<int64_t> elements(const std::vector<int64_t>& rows, int64_t w) {
    std::vector<int64_t> e(rows);
    for (int64_t& v : e) v *= w;
    return e;
}

// With a quarter more room than asked, so that a slowly growing imbalance does not reallocate
// every micro-batch.
int64_t grown(int64_t rows, int64_t have) {
    return std::max(rows, have + have / 4);
}

}  // namespace

AllToAllDispatcher::AllToAllDispatcher(const ModelConfig& c, Communicator& group, bool overlap)
    : c_(c), group_(group), n_local_(c.moe->n_experts / group.size()), overlap_(overlap) {}

const char* AllToAllDispatcher::name() const {
    return overlap_ ? "overlapped all-to-all" : "all-to-all";
}

void AllToAllDispatcher::plan(Device& dev, int64_t N, DType xg, int moe_layers) {
    layers_.clear();  // frees the buffers of the previous shape first
    grads_ = GradRows{};
    xg_ = xg;
    const int64_t rows = moe_dispatch_rows_balanced(c_, N);
    reserve_grads(dev, rows);
    for (int l = 0; l < moe_layers; ++l) {
        LayerRows d;
        d.counts = dev.alloc(DType::i32, {group_.size(), n_local_});
        reserve_rows(dev, d, rows);
        layers_.push_back(std::move(d));
    }
}

void AllToAllDispatcher::forward(Device& dev, int moe_layer, const MoeActs& a, int64_t /*rows*/,
                                 const Experts& experts) {
    LayerRows& d = layer(moe_layer);
    exchange_counts(dev, a, d);
    reserve_rows(dev, d, total(d.recv_rows));
    if (overlap_) {
        forward_overlapped(dev, d, a, experts);
        return;
    }
    exchange_rows(dev, a.xg, d.send_rows, d.xr, d.recv_rows);
    for (int64_t s = 0; s < group_.size(); ++s)
        if (d.recv_rows[static_cast<size_t>(s)] > 0) experts(block(d, s));
    exchange_rows(dev, d.yr, d.recv_rows, a.yrows, d.send_rows);
}

void AllToAllDispatcher::backward(Device& dev, int moe_layer, const MoeActs& /*a*/,
                                  const GradScratch& g, int64_t /*rows*/,
                                  const ExpertsBackward& experts,
                                  const std::function<void()>& meanwhile) {
    LayerRows& d = layer(moe_layer);
    reserve_grads(dev, total(d.recv_rows));
    if (overlap_) {
        backward_overlapped(dev, d, g, experts, meanwhile);
        return;
    }
    meanwhile();
    exchange_rows(dev, g.drows, d.send_rows, grads_.dyr, d.recv_rows);
    for (int64_t s = 0; s < group_.size(); ++s)
        if (d.recv_rows[static_cast<size_t>(s)] > 0) experts(grad_block(d, s, g));
    exchange_rows(dev, grads_.dxr, d.recv_rows, g.dxg, d.send_rows);
}

AllToAllDispatcher::LayerRows& AllToAllDispatcher::layer(int moe_layer) {
    MT_CHECK(moe_layer >= 0 && static_cast<size_t>(moe_layer) < layers_.size(),
             "expert-parallel dispatch of MoE layer ", moe_layer, " before it was planned");
    return layers_[static_cast<size_t>(moe_layer)];
}

ExpertBlock AllToAllDispatcher::block(const LayerRows& d, int64_t s) const {
    const auto i = static_cast<size_t>(s);
    const int64_t off = d.recv_first[i], n = d.recv_rows[i], D = c_.d_model, F = c_.d_ff;
    ExpertBlock b{n,
                  d.counts.view(s * n_local_, {n_local_}),
                  n_local_,
                  rows_of(d.xr, off, n, D),
                  rows_of(d.yr, off, n, D),
                  FfnActs{}};
    b.acts.gate = rows_of(d.acts.gate, off, n, F);
    b.acts.up = rows_of(d.acts.up, off, n, F);
    b.acts.h = rows_of(d.acts.h, off, n, F);
    return b;
}

ExpertGradBlock AllToAllDispatcher::grad_block(const LayerRows& d, int64_t s,
                                               const GradScratch& g) const {
    const auto i = static_cast<size_t>(s);
    const int64_t off = d.recv_first[i], n = d.recv_rows[i], D = c_.d_model;
    ExpertGradBlock b{block(d, s), rows_of(grads_.dyr, off, n, D), rows_of(grads_.dxr, off, n, D),
                      g};
    b.block.y = Tensor{};
    b.scratch.dh = grads_.dh;  // the hidden gradients of the received rows
    b.scratch.dgate = grads_.dgate;
    b.scratch.dup = grads_.dup;
    return b;
}

void AllToAllDispatcher::reserve_rows(Device& dev, LayerRows& d, int64_t rows) const {
    if (rows <= d.rows) return;
    const int64_t n = grown(rows, d.rows), D = c_.d_model, F = c_.d_ff;
    d.xr = d.yr = Tensor{};  // the old buffers are freed first
    d.acts = FfnActs{};
    d.rows = n;
    d.xr = dev.alloc(xg_, {n, D});
    d.yr = dev.alloc(DType::f32, {n, D});
    if (c_.ffn == FfnKind::swiglu) d.acts.gate = dev.alloc(DType::f32, {n, F});
    d.acts.up = dev.alloc(DType::f32, {n, F});
    d.acts.h = dev.alloc(DType::f32, {n, F});
}

void AllToAllDispatcher::reserve_grads(Device& dev, int64_t rows) {
    if (rows <= grads_.rows) return;
    const int64_t n = grown(rows, grads_.rows), D = c_.d_model, F = c_.d_ff;
    grads_ = GradRows{};
    grads_.rows = n;
    grads_.dyr = dev.alloc(DType::f32, {n, D});
    grads_.dxr = dev.alloc(DType::f32, {n, D});
    grads_.dh = dev.alloc(DType::f32, {n, F});
    grads_.dup = dev.alloc(DType::f32, {n, F});
    if (c_.ffn == FfnKind::swiglu) grads_.dgate = dev.alloc(DType::f32, {n, F});
}

void AllToAllDispatcher::exchange_counts(Device& dev, const MoeActs& a, LayerRows& d) const {
    const int64_t E = c_.moe->n_experts, P = group_.size(), j = group_.rank(), El = n_local_;
    std::vector<int32_t> mine(static_cast<size_t>(E)), all(static_cast<size_t>(P * E)),
        local(static_cast<size_t>(P * El));
    dev.download(mine.data(), a.counts.view(0, {E}));
    group_.all_gather(mine.data(), all.data(), E, DType::i32);
    d.send_rows.assign(static_cast<size_t>(P), 0);
    d.recv_rows.assign(static_cast<size_t>(P), 0);
    for (int64_t e = 0; e < E; ++e) d.send_rows[static_cast<size_t>(e / El)] += mine[e];
    for (int64_t s = 0; s < P; ++s)
        for (int64_t e = 0; e < El; ++e) {
            const int32_t v = all[static_cast<size_t>(s * E + j * El + e)];
            local[static_cast<size_t>(s * El + e)] = v;
            d.recv_rows[static_cast<size_t>(s)] += v;
        }
    d.send_first = firsts(d.send_rows);
    d.recv_first = firsts(d.recv_rows);
    dev.upload(d.counts, local.data());
}

void AllToAllDispatcher::exchange_rows(Device& dev, const Tensor& send,
                                       const std::vector<int64_t>& send_rows, const Tensor& recv,
                                       const std::vector<int64_t>& recv_rows) const {
    group_.all_to_all_v(dev, send, elements(send_rows, c_.d_model), recv,
                        elements(recv_rows, c_.d_model));
}

int64_t AllToAllDispatcher::start_exchange(Device& dev, const Tensor& send,
                                           const std::vector<int64_t>& send_rows,
                                           const std::vector<int64_t>& recv_rows) {
    const int64_t D = c_.d_model, ns = total(send_rows), nr = total(recv_rows);
    const auto es = static_cast<int64_t>(dtype_size(send.dtype));
    send_h_.resize(static_cast<size_t>(ns * D * es));
    recv_h_.resize(static_cast<size_t>(nr * D * es));
    if (ns > 0) dev.download(send_h_.data(), rows_of(send, 0, ns, D));
    return group_.start_all_to_all_v(send_h_.data(), elements(send_rows, D), recv_h_.data(),
                                     elements(recv_rows, D), send.dtype);
}

void AllToAllDispatcher::finish_exchange(Device& dev, int64_t id, const Tensor& recv,
                                         const LayerRows& d, bool skip_own) {
    group_.wait(id);
    const int64_t D = c_.d_model;
    const auto es = static_cast<int64_t>(dtype_size(recv.dtype));
    for (int64_t s = 0; s < group_.size(); ++s) {
        const auto i = static_cast<size_t>(s);
        if (d.recv_rows[i] == 0 || (skip_own && s == group_.rank())) continue;
        dev.upload(rows_of(recv, d.recv_first[i], d.recv_rows[i], D),
                   recv_h_.data() + d.recv_first[i] * D * es);
    }
}

std::unique_ptr<TokenDispatcher> make_all_to_all_dispatcher(const ModelConfig& c,
                                                            Communicator& group, bool overlap) {
    return std::make_unique<AllToAllDispatcher>(c, group, overlap);
}

int64_t moe_dispatch_rows_balanced(const ModelConfig& c, int64_t N) {
    return N * c.moe->active_k();
}

int64_t moe_dispatch_rows_max(const ModelConfig& c, int64_t group_size, int64_t N) {
    const int64_t k = c.moe->active_k(), local = c.moe->n_experts / group_size;
    return group_size * N * std::min(k, local);
}

int64_t moe_dispatch_bytes(const ModelConfig& c, int64_t group_size, int64_t rows, DType xg_dtype,
                           int layers) {
    const int64_t P = group_size, El = c.moe->n_experts / P, D = c.d_model, F = c.d_ff;
    const int64_t M = rows, hidden = c.ffn == FfnKind::swiglu ? 3 : 2;
    const int64_t scratch = 2 * M * D * 4 + hidden * M * F * 4;
    const int64_t layer = M * D * static_cast<int64_t>(dtype_size(xg_dtype)) + M * D * 4 +
                          hidden * M * F * 4 + P * El * 4;
    return scratch + layers * layer;
}

}  // namespace moetrain
