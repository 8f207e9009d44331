// The all-to-all token dispatcher (dispatchers.h), expert parallel: the E experts are split
// over the P ranks of an expert-parallel group (docs/DISTRIBUTED.md), rank j holding experts
// [j E/P, (j + 1) E/P). Per layer and micro-batch every rank downloads its expert counts [E]
// and the group all-gathers them (P x E i32 on the host), so each rank knows how many of its
// sorted rows go to every owner and how many rows it receives from every source for each of its
// experts. The rows sorted by expert are already in blocks by owner, so a.xg is the send buffer
// as it is; the received rows come in blocks by source, each sorted by local expert, and the
// experts run once per source block (the weight of group e is local expert e in every block).
// Outputs go back the reverse way into a.yrows, in the order the combine reads. The backward
// sends g.drows the same way, runs the experts' backward per block (the weight gradients of the
// local experts add up over the blocks) and returns g.dxg.
#include <algorithm>
#include <vector>

#include "dispatch/dispatchers.h"
#include "moetrain/comm.h"

namespace moetrain {
namespace {

// Backward scratch shared by the MoE layers: the gradients of the received rows.
struct GradRows {
    int64_t rows = 0;       // capacity
    Tensor dyr, dxr;        // received output-row / returned input-row gradients [rows, D]
    Tensor dh, dgate, dup;  // the experts' hidden gradients [rows, F]
};

// One MoE layer's state. The rows this rank receives arrive in blocks by source rank, each
// sorted by local expert. Their number depends on the routing: N k per rank when the router
// is balanced, at most P N min(k, E/P) (every token of the group routed here); the buffers
// start at the balanced size and grow (outside any recorded step: these passes run eagerly)
// when a micro-batch needs more.
struct LayerRows {
    int64_t rows = 0;  // capacity of xr, yr, acts
    Tensor xr;         // received input rows [rows, D] (MoeActs::xg's dtype)
    Tensor yr;         // this rank's expert outputs over them [rows, D] f32
    FfnActs acts;      // the experts' activations over them [rows, F] f32
    Tensor counts;     // i32 [P, n_local]: rows from source s for local expert e
    std::vector<int64_t> send_rows, recv_rows;  // per rank of the group, from the last forward
};

int64_t total(const std::vector<int64_t>& v) {
    int64_t t = 0;
    for (int64_t x : v) t += x;
    return t;
}

// Rows [off, off + n) of a tensor of width w.
Tensor rows_of(const Tensor& t, int64_t off, int64_t n, int64_t w) {
    return t ? t.view(off * w, {n, w}) : Tensor{};
}
FfnActs acts_rows(const FfnActs& a, int64_t off, int64_t n, int64_t F) {
    FfnActs r;
    r.gate = rows_of(a.gate, off, n, F);
    r.up = rows_of(a.up, off, n, F);
    r.h = rows_of(a.h, off, n, F);
    return r;
}

// With a quarter more room than asked, so that a slowly growing imbalance does not reallocate
// every micro-batch.
int64_t grown(int64_t rows, int64_t have) {
    return std::max(rows, have + have / 4);
}

class AllToAllDispatcher final : public TokenDispatcher {
  public:
    AllToAllDispatcher(const ModelConfig& c, Communicator& group)
        : c_(c), group_(group), n_local_(c.moe->n_experts / group.size()) {}

    const char* name() const override { return "all-to-all"; }
    int64_t local_experts() const override { return n_local_; }

    void plan(Device& dev, int64_t N, DType xg, int moe_layers) override {
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

    void forward(Device& dev, int moe_layer, const MoeActs& a, int64_t /*rows*/,
                 const Experts& experts) override {
        LayerRows& d = layer(moe_layer);
        exchange_counts(dev, a, d);
        reserve_rows(dev, d, total(d.recv_rows));
        exchange_rows(dev, a.xg, d.send_rows, d.xr, d.recv_rows);
        const int64_t D = c_.d_model, F = c_.d_ff;
        for_each_source(d, [&](int64_t s, int64_t off, int64_t n) {
            experts({n, d.counts.view(s * n_local_, {n_local_}), n_local_, rows_of(d.xr, off, n, D),
                     rows_of(d.yr, off, n, D), acts_rows(d.acts, off, n, F)});
        });
        exchange_rows(dev, d.yr, d.recv_rows, a.yrows, d.send_rows);
    }

    void backward(Device& dev, int moe_layer, const MoeActs& /*a*/, const GradScratch& g,
                  int64_t /*rows*/, const ExpertsBackward& experts) override {
        LayerRows& d = layer(moe_layer);
        reserve_grads(dev, total(d.recv_rows));
        exchange_rows(dev, g.drows, d.send_rows, grads_.dyr, d.recv_rows);
        GradScratch gs = g;  // the hidden gradients of the received rows
        gs.dh = grads_.dh;
        gs.dgate = grads_.dgate;
        gs.dup = grads_.dup;
        const int64_t D = c_.d_model, F = c_.d_ff;
        for_each_source(d, [&](int64_t s, int64_t off, int64_t n) {
            const ExpertBlock b{n,        d.counts.view(s * n_local_, {n_local_}),
                                n_local_, rows_of(d.xr, off, n, D),
                                Tensor{}, acts_rows(d.acts, off, n, F)};
            experts({b, rows_of(grads_.dyr, off, n, D), rows_of(grads_.dxr, off, n, D), gs});
        });
        exchange_rows(dev, grads_.dxr, d.recv_rows, g.dxg, d.send_rows);
    }

  private:
    LayerRows& layer(int moe_layer) {
        MT_CHECK(moe_layer >= 0 && static_cast<size_t>(moe_layer) < layers_.size(),
                 "expert-parallel dispatch of MoE layer ", moe_layer, " before it was planned");
        return layers_[static_cast<size_t>(moe_layer)];
    }

    // The non-empty source blocks of the received rows, in order: f(source, first row, rows).
    template <typename F>
    static void for_each_source(const LayerRows& d, F&& f) {
        int64_t off = 0;
        for (size_t s = 0; s < d.recv_rows.size(); ++s) {
            const int64_t n = d.recv_rows[s];
            if (n == 0) continue;
            f(static_cast<int64_t>(s), off, n);
            off += n;
        }
    }

    void reserve_rows(Device& dev, LayerRows& d, int64_t rows) const {
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

    void reserve_grads(Device& dev, int64_t rows) {
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

    // The counts of this micro-batch: rows sent to every owner, rows received from every source
    // (and per local expert, uploaded for the grouped products).
    void exchange_counts(Device& dev, const MoeActs& a, LayerRows& d) const {
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
        dev.upload(d.counts, local.data());
    }

    // all_to_all_v of rows of width d_model over the group.
    void exchange_rows(Device& dev, const Tensor& send, const std::vector<int64_t>& send_rows,
                       const Tensor& recv, const std::vector<int64_t>& recv_rows) const {
        std::vector<int64_t> sc(send_rows), rc(recv_rows);
        for (int64_t& v : sc) v *= c_.d_model;
        for (int64_t& v : rc) v *= c_.d_model;
        group_.all_to_all_v(dev, send, sc, recv, rc);
    }

    const ModelConfig& c_;
    Communicator& group_;
    int64_t n_local_;
    DType xg_ = DType::f32;
    std::vector<LayerRows> layers_;
    GradRows grads_;  // shared by the layers: one backward at a time
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_all_to_all_dispatcher(const ModelConfig& c,
                                                            Communicator& group) {
    return std::make_unique<AllToAllDispatcher>(c, group);
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
