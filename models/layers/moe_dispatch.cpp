// The routed experts of an MoE layer, local or expert-parallel (moe_dispatch.h).
// Expert parallel, per layer and micro-batch: every rank downloads its expert counts [E] and
// the group all-gathers them (P x E i32 on the host), so each rank knows how many of its
// sorted rows go to every owner and how many rows it receives from every source for each of
// its experts. The rows sorted by expert are already in blocks by owner, so a.xg is the send
// buffer as it is; the received rows come in blocks by source, each sorted by local expert,
// and the owner runs its grouped FFN once per source block (the weight of group e is local
// expert e in every block). Outputs go back the reverse way into a.yrows, in the order the
// combine reads. The backward sends g.drows the same way, runs the experts' backward (the
// weight gradients of the local experts add up over the blocks) and returns g.dxg. The expert
// weights a rank holds are its own experts only (the shard layout of param_layout.h).
#include "layers/moe_dispatch.h"

#include <algorithm>

#include "layers/layers.h"

namespace moetrain {
namespace {

// Allocates a layer's row buffers for `rows` rows when they hold fewer (with a quarter more
// room, so a slowly growing imbalance does not reallocate every micro-batch).
void reserve_rows(Device& dev, const ModelConfig& c, MoeDispatch& d, int64_t rows) {
    if (rows <= d.rows) return;
    const int64_t n = std::max(rows, d.rows + d.rows / 4), D = c.d_model, F = c.d_ff;
    d = MoeDispatch{d.group, d.n_local, d.xg_dtype,  n,           {},       {},
                    {},      d.counts,  d.send_rows, d.recv_rows, d.scratch};  // the old buffers
                                                                               // are freed first
    d.xr = dev.alloc(d.xg_dtype, {n, D});
    d.yr = dev.alloc(DType::f32, {n, D});
    if (c.ffn == FfnKind::swiglu) d.acts.gate = dev.alloc(DType::f32, {n, F});
    d.acts.up = dev.alloc(DType::f32, {n, F});
    d.acts.h = dev.alloc(DType::f32, {n, F});
}

void reserve_scratch(Device& dev, const ModelConfig& c, MoeDispatchScratch& s, int64_t rows) {
    if (rows <= s.rows) return;
    const int64_t n = std::max(rows, s.rows + s.rows / 4), D = c.d_model, F = c.d_ff;
    s = MoeDispatchScratch{};
    s.rows = n;
    s.dyr = dev.alloc(DType::f32, {n, D});
    s.dxr = dev.alloc(DType::f32, {n, D});
    s.dh = dev.alloc(DType::f32, {n, F});
    s.dup = dev.alloc(DType::f32, {n, F});
    if (c.ffn == FfnKind::swiglu) s.dgate = dev.alloc(DType::f32, {n, F});
}

int64_t total(const std::vector<int64_t>& v) {
    int64_t t = 0;
    for (int64_t x : v) t += x;
    return t;
}

// Rows [off, off + n) of activations of width F.
FfnActs acts_rows(const FfnActs& a, int64_t off, int64_t n, int64_t F) {
    FfnActs r;
    if (a.gate) r.gate = a.gate.view(off * F, {n, F});
    r.up = a.up.view(off * F, {n, F});
    r.h = a.h.view(off * F, {n, F});
    return r;
}

Tensor rows_of(const Tensor& t, int64_t off, int64_t n, int64_t D) {
    return t.view(off * D, {n, D});
}

// The counts of this micro-batch: rows sent to every owner, rows received from every source
// (and per local expert, uploaded for the grouped products).
void exchange_counts(Device& dev, const MoeActs& a, int64_t E, MoeDispatch& d) {
    Communicator& c = *d.group;
    const int64_t P = c.size(), j = c.rank(), El = d.n_local;
    std::vector<int32_t> mine(static_cast<size_t>(E)), all(static_cast<size_t>(P * E)),
        local(static_cast<size_t>(P * El));
    dev.download(mine.data(), a.counts.view(0, {E}));
    c.all_gather(mine.data(), all.data(), E, DType::i32);
    d.send_rows.assign(static_cast<size_t>(P), 0);
    d.recv_rows.assign(static_cast<size_t>(P), 0);
    for (int64_t e = 0; e < E; ++e) d.send_rows[static_cast<size_t>(e / El)] += mine[e];
    for (int64_t s = 0; s < P; ++s)
        for (int64_t e = 0; e < El; ++e) {
            const int32_t v = all[static_cast<size_t>(s * E + j * El + e)];
            local[static_cast<size_t>(s * El + e)] = v;
            d.recv_rows[static_cast<size_t>(s)] += v;
        }
    dev.upload(d.counts, local.data());
}

// all_to_all_v of rows of width D over the group.
void exchange_rows(Device& dev, const MoeDispatch& d, const Tensor& send,
                   const std::vector<int64_t>& send_rows, const Tensor& recv,
                   const std::vector<int64_t>& recv_rows, int64_t D) {
    std::vector<int64_t> sc(send_rows), rc(recv_rows);
    for (int64_t& v : sc) v *= D;
    for (int64_t& v : rc) v *= D;
    d.group->all_to_all_v(dev, send, sc, recv, rc);
}

}  // namespace

int64_t moe_dispatch_rows_balanced(const ModelConfig& c, int64_t N) {
    return N * c.moe->active_k();
}

int64_t moe_dispatch_rows_max(const ModelConfig& c, int64_t group_size, int64_t N) {
    const int64_t k = c.moe->active_k(), local = c.moe->n_experts / group_size;
    return group_size * N * std::min(k, local);
}

std::vector<MoeDispatch> plan_moe_dispatch(Device& dev, const ModelConfig& c, Communicator* group,
                                           int64_t N, DType xg_dtype, int layers) {
    const int64_t P = group->size(), El = c.moe->n_experts / P;
    const int64_t rows = moe_dispatch_rows_balanced(c, N);
    auto scratch = std::make_shared<MoeDispatchScratch>();
    reserve_scratch(dev, c, *scratch, rows);
    std::vector<MoeDispatch> out;
    for (int l = 0; l < layers; ++l) {
        MoeDispatch d;
        d.group = group;
        d.n_local = El;
        d.xg_dtype = xg_dtype;
        d.scratch = scratch;
        d.counts = dev.alloc(DType::i32, {P, El});
        reserve_rows(dev, c, d, rows);
        out.push_back(std::move(d));
    }
    return out;
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

void moe_experts_fwd(Device& dev, const ModelConfig& c, const FfnW& w, const MoeActs& a,
                     int64_t rows, MoeDispatch* ep) {
    const int64_t E = c.moe->n_experts, D = c.d_model, F = c.d_ff;
    MT_CHECK(w.G == (ep ? ep->n_local : E), "MoE pass over ", w.G, " experts of ", E,
             ep ? " on an expert-parallel rank" : " without the expert-parallel group");
    if (!ep) {
        ffn_fwd(dev, c.ffn, w, FfnRows::experts(rows, a.counts, E), a.xg, a.experts, a.yrows, 0.0f);
        return;
    }
    MoeDispatch& d = *ep;
    const int64_t El = d.n_local, P = d.group->size();
    exchange_counts(dev, a, E, d);
    reserve_rows(dev, c, d, total(d.recv_rows));
    exchange_rows(dev, d, a.xg, d.send_rows, d.xr, d.recv_rows, D);
    int64_t off = 0;
    for (int64_t s = 0; s < P; ++s) {
        const int64_t n = d.recv_rows[static_cast<size_t>(s)];
        if (n == 0) continue;
        ffn_fwd(dev, c.ffn, w, FfnRows::experts(n, d.counts.view(s * El, {El}), El),
                rows_of(d.xr, off, n, D), acts_rows(d.acts, off, n, F), rows_of(d.yr, off, n, D),
                0.0f);
        off += n;
    }
    exchange_rows(dev, d, d.yr, d.recv_rows, a.yrows, d.send_rows, D);
}

void moe_experts_bwd(Device& dev, const ModelConfig& c, const FfnW& w, const FfnW& gw,
                     const MoeActs& a, const GradScratch& g, int64_t rows, MoeDispatch* ep) {
    const int64_t E = c.moe->n_experts, D = c.d_model, F = c.d_ff;
    if (!ep) {
        ffn_bwd(dev, c.ffn, w, gw, FfnRows::experts(rows, a.counts, E), a.xg, a.experts, g.drows, g,
                g.dxg, false);
        return;
    }
    MoeDispatch& d = *ep;
    const int64_t El = d.n_local, P = d.group->size();
    MoeDispatchScratch& sc = *d.scratch;
    reserve_scratch(dev, c, sc, total(d.recv_rows));
    exchange_rows(dev, d, g.drows, d.send_rows, sc.dyr, d.recv_rows, D);
    GradScratch gs = g;  // the hidden gradients of the received rows
    gs.dh = sc.dh;
    gs.dgate = sc.dgate;
    gs.dup = sc.dup;
    int64_t off = 0;
    for (int64_t s = 0; s < P; ++s) {
        const int64_t n = d.recv_rows[static_cast<size_t>(s)];
        if (n == 0) continue;
        ffn_bwd(dev, c.ffn, w, gw, FfnRows::experts(n, d.counts.view(s * El, {El}), El),
                rows_of(d.xr, off, n, D), acts_rows(d.acts, off, n, F), rows_of(sc.dyr, off, n, D),
                gs, rows_of(sc.dxr, off, n, D), false);
        off += n;
    }
    exchange_rows(dev, d, sc.dxr, d.recv_rows, g.dxg, d.send_rows, D);
}

}  // namespace moetrain
