// The data-parallel parts of the Trainer (docs/DISTRIBUTED.md): parameter broadcast before the
// first step, the bucketed gradient all-reduce and the loss terms summed over the ranks, and
// ZeRO-1: the gradients reduce-scattered into each rank's shard, the global gradient norm from
// the shards' squared norms, the parameter all-gather after the shard updates, and the moments
// gathered for checkpoints and scattered after loading them. Expert parallelism: its
// subgroups and segments and its reductions (with ZeRO-1 its sharding is trainer_ep_zero.cpp's,
// its checkpoint layout trainer_ep_state.cpp's).
#include <algorithm>

#include "model/train_passes.h"
#include "train/trainer_impl.h"
#include "shared/mt_math.h"

namespace moetrain {

void Trainer::Impl::setup_dist() {
    const int64_t n = model_.num_params();
    shard_lo_ = 0;
    shard_hi_ = n;
    owned_ = {{0, n}};
    const int ranks = dist_.comm ? dist_.comm->size() : 1;
    MT_CHECK(dist_.expert_parallel >= 1 && ranks % dist_.expert_parallel == 0, "--expert-parallel ",
             dist_.expert_parallel, " does not divide the ", ranks, " ranks of this launch");
    if (!dp()) return;
    MT_CHECK(dist_.zero == 0 || dist_.zero == 1, "--zero ", dist_.zero, ": only 0 and 1 exist");
    MT_CHECK(dist_.bucket_elems >= 1, "gradient bucket size must be >= 1");
    TrainPasses(model_).set_data_parallel(dist_.comm);
    if (ep()) setup_expert_parallel();
    if (!zero()) return;
    MT_CHECK(opts_.optimizer != OptimizerKind::sgd, "--zero 1 shards the AdamW moments; ",
             optimizer_name(opts_.optimizer), " has no optimizer state to shard");
    if (ep()) {
        setup_ep_zero();
        return;
    }
    const int R = dist_.comm->size(), r = dist_.comm->rank();
    if (opts_.optimizer == OptimizerKind::adamw8bit) {
        // The 8-bit state is quantised in blocks from the start of each range, so the shards
        // cut the decayed range [0, nd) at multiples of the block (the update of a block
        // reads only that block: the same numbers as one process); the gains and biases
        // after it (a small range whose block grid starts at nd) stay replicated.
        const int64_t nd = TrainPasses(model_).n_decay();
        shard_len_ = ((nd + R - 1) / R + MT_QBLOCK - 1) / MT_QBLOCK * MT_QBLOCK;
        shard_lo_ = std::min<int64_t>(nd, r * shard_len_);
        shard_hi_ = std::min<int64_t>(nd, shard_lo_ + shard_len_);
        owned_ = {{shard_lo_, shard_hi_ - shard_lo_}, {nd, n - nd}};
    } else {
        shard_len_ = (n + R - 1) / R;
        shard_lo_ = std::min<int64_t>(n, r * shard_len_);
        shard_hi_ = std::min<int64_t>(n, shard_lo_ + shard_len_);
        owned_ = {{shard_lo_, shard_hi_ - shard_lo_}};
    }
    Device& dev = model_.device();
    gshard_ = dev.alloc(DType::f32, {shard_len_});
    pshard_ = dev.alloc(DType::f32, {shard_len_});
}

Trainer::Impl::~Impl() {
    if (ep()) TrainPasses(model_).drop_expert_group();  // ep_group_ is freed with this Trainer
}

void Trainer::Impl::setup_expert_parallel() {
    const ModelConfig& cfg = model_.config();
    const int P = dist_.expert_parallel, R = dist_.comm->size(), r = dist_.comm->rank();
    MT_CHECK(cfg.moe, "--expert-parallel ", P, " needs an MoE model (this one is dense)");
    MT_CHECK(cfg.moe->n_experts % P == 0, "--expert-parallel ", P, " does not divide the ",
             cfg.moe->n_experts, " experts of every MoE layer");
    const bool q8 = opts_.optimizer == OptimizerKind::adamw8bit;
    MT_CHECK(!q8 || dist_.zero == 0,
             "--expert-parallel with --zero 1 and --optimizer adamw8bit is not supported (the "
             "ZeRO-1 pieces of the expert blocks would cut through its 256-element blocks); use "
             "--zero 0 or --optimizer adamw");
    if (q8) check_expert_blocks_aligned();  // on the whole layout
    ep_group_ = dist_.comm->subgroup(r / P * P, 1, P);
    ep_replicas_ = dist_.comm->subgroup(r % P, P, R / P);
    TrainPasses im(model_);
    im.set_expert_parallel(ep_group_.get());  // the model keeps this rank's experts only
    // The flat buffers: the non-expert weights (shared_) and this rank's experts (mine_).
    const int64_t n = im.n_params();
    shared_.clear();
    mine_.clear();
    int64_t at = 0;
    for (const TrainPasses::ExpertTensor& t : im.expert_tensors()) {
        if (t.offset > at) shared_.push_back({at, t.offset - at});
        mine_.push_back({t.offset, t.numel()});
        at = t.offset + t.numel();
    }
    if (at < n) shared_.push_back({at, n - at});
    owned_ = {{0, n}};
    ep_sq_ = model_.device().alloc(DType::f32, {1});
}

void Trainer::Impl::check_expert_blocks_aligned() const {
    // 8-bit AdamW updates a rank's decayed range with one adamw8bit call; that is the block
    // grid of one process (a block reads only itself) when every boundary between an expert
    // block and its neighbours in the whole layout lies on a block boundary of the decayed
    // range [0, nd) or at nd: the rank's buffer is then whole blocks of the whole buffer's.
    // The expert tensors are rank 3, so all of them lie in the decayed range.
    TrainPasses im(model_);
    const int64_t nd = im.n_decay(), P = dist_.expert_parallel;
    for (const TrainPasses::ExpertTensor& t : im.expert_tensors()) {
        MT_CHECK(t.offset + t.numel() <= nd, "expert tensor [", t.offset, ", ",
                 t.offset + t.numel(), ") is outside the decayed range [0, ", nd, ")");
        for (int64_t q = 0; q <= P; ++q) {
            const int64_t edge = t.offset + q * (t.numel() / P);
            if (edge % MT_QBLOCK == 0 || edge == nd) continue;
            std::string name = "an expert tensor";
            for (const ParamInfo& p : im.layout())
                if (p.offset == t.offset) name = p.name;
            fail("--expert-parallel ", P,
                 " with --optimizer adamw8bit needs every expert block to start and end at a "
                 "multiple of ",
                 MT_QBLOCK, " elements of the decayed range (", name, ": offset ", edge,
                 "); use --optimizer adamw");
        }
    }
}

void Trainer::Impl::owned_copy(const Tensor& full, const Tensor& part, bool to_full) {
    Device& dev = model_.device();
    int64_t at = 0;
    for (const Segment& seg : owned_) {
        const Tensor f = full.view(seg.first, {seg.count}), p = part.view(at, {seg.count});
        dev.copy(to_full ? f : p, to_full ? p : f);
        at += seg.count;
    }
}

bool Trainer::Impl::overlap() const {
    return dp() && !zero() && !ep() && dist_.overlap && dist_.comm->engine() == "mpi";
}

void Trainer::Impl::begin_overlap() {
    if (!overlap()) return;
    hgrads_.resize(static_cast<size_t>(model_.num_params()));
    pending_.clear();
    TrainPasses(model_).set_layer_grads_ready([this](int l) { start_reduce(l); });
}

void Trainer::Impl::start_reduce(int layer) {
    TrainPasses im(model_);
    Device& dev = model_.device();
    Communicator& c = *dist_.comm;
    for (const TrainPasses::Range& r : im.layer_ranges(layer)) {
        float* h = hgrads_.data() + r.first;
        dev.download(h, im.grads().view(r.first, {r.count}));  // waits for the backward so far
        for (int64_t off = 0; off < r.count; off += dist_.bucket_elems)
            pending_.push_back(c.start_all_reduce(
                h + off, std::min(dist_.bucket_elems, r.count - off), DType::f32, ReduceOp::sum));
    }
    c.progress();
}

void Trainer::Impl::sync_parameters() {
    if (!dp() || synced_) return;
    TrainPasses im(model_);
    Device& dev = model_.device();
    if (ep()) {  // the non-expert weights from rank 0, every block of experts from group 0
        for (const Segment& seg : shared_)
            dist_.comm->broadcast(dev, im.params().view(seg.first, {seg.count}), 0);
        for (const Segment& seg : mine_)
            ep_replicas_->broadcast(dev, im.params().view(seg.first, {seg.count}), 0);
    } else {
        dist_.comm->broadcast(dev, im.params(), 0);
    }
    im.params_changed();
    synced_ = true;
}

void Trainer::Impl::reduce_gradients() {
    TrainPasses im(model_);
    Device& dev = model_.device();
    const int64_t n = im.n_params();
    if (!dp()) {
        dev.sum_squares(stats_, im.grads(), n, false);
        return;
    }
    Communicator& c = *dist_.comm;
    if (overlap()) {  // every layer's all-reduce is under way: the rest, then wait for all
        im.set_layer_grads_ready({});
        start_reduce(-1);
        c.all_reduce(dev, im.stats().view(0, {3}), ReduceOp::sum);
        for (int64_t id : pending_) c.wait(id);
        pending_.clear();
        dev.upload(im.grads(), hgrads_.data());
        dev.sum_squares(stats_, im.grads(), n, false);
        return;
    }
    c.all_reduce(dev, im.stats().view(0, {3}), ReduceOp::sum);  // ce, aux, z: sums of shares
    if (ep() && zero()) {
        ep_zero_reduce();
        return;
    }
    if (ep()) {
        // Non-expert gradients over every rank, this rank's experts over the ranks holding
        // them; the other experts' gradients are zero here and belong to their owners. The
        // squared norm: the shared part, plus every expert once (summed over the group).
        auto reduce = [&](const std::vector<Segment>& segs, Communicator& over) {
            for (const Segment& seg : segs)
                for (int64_t off = 0; off < seg.count; off += dist_.bucket_elems)
                    over.all_reduce(dev,
                                    im.grads().view(seg.first + off, {std::min(dist_.bucket_elems,
                                                                               seg.count - off)}),
                                    ReduceOp::sum);
        };
        reduce(shared_, c);
        if (ep_replicas_->size() > 1) reduce(mine_, *ep_replicas_);
        dev.fill(stats_, 0.0f);
        dev.fill(ep_sq_, 0.0f);
        for (const Segment& seg : shared_)
            dev.sum_squares(stats_, im.grads().view(seg.first, {seg.count}), seg.count, true);
        for (const Segment& seg : mine_)
            dev.sum_squares(ep_sq_, im.grads().view(seg.first, {seg.count}), seg.count, true);
        ep_group_->all_reduce(dev, ep_sq_, ReduceOp::sum);
        dev.axpby(stats_, 1.0f, ep_sq_, 1.0f, 1);
        return;
    }
    if (!zero()) {
        for (int64_t off = 0; off < n; off += dist_.bucket_elems)
            c.all_reduce(dev, im.grads().view(off, {std::min(dist_.bucket_elems, n - off)}),
                         ReduceOp::sum);
        dev.sum_squares(stats_, im.grads(), n, false);
        return;
    }
    const bool q8 = opts_.optimizer == OptimizerKind::adamw8bit;
    const int64_t sharded = q8 ? im.n_decay() : n;                  // 8-bit: the decayed range only
    c.reduce_scatter(dev, im.grads().view(0, {sharded}), gshard_);  // padding reads as 0
    dev.sum_squares(stats_, gshard_, shard_len_, false);
    c.all_reduce(dev, stats_, ReduceOp::sum);
    if (!q8 || sharded == n) return;
    const Tensor rest = im.grads().view(sharded, {n - sharded});  // replicated: all-reduced
    c.all_reduce(dev, rest, ReduceOp::sum);
    dev.sum_squares(stats_, rest, n - sharded, true);
}

void Trainer::Impl::update_zero8(AdamWArgs a, float clip, float inv_scale) {
    TrainPasses im(model_);
    Device& dev = model_.device();
    const int64_t n = im.n_params(), nd = im.n_decay(), cnt = shard_hi_ - shard_lo_;
    const QuantizedMoments &d = q_[0], &u = q_[1];
    if (cnt > 0) {
        const int64_t blocks = (cnt + MT_QBLOCK - 1) / MT_QBLOCK;
        dev.adamw8bit(im.params().view(shard_lo_, {cnt}), gshard_.view(0, {cnt}),
                      d.m_codes.view(0, {cnt}), d.v_codes.view(0, {cnt}),
                      d.m_absmax.view(0, {blocks}), d.v_absmax.view(0, {blocks}), cnt, a, stats_,
                      clip, inv_scale);
    }
    a.wd = 0.0f;
    if (n > nd)
        dev.adamw8bit(im.params().view(nd, {n - nd}), im.grads().view(nd, {n - nd}), u.m_codes,
                      u.v_codes, u.m_absmax, u.v_absmax, n - nd, a, stats_, clip, inv_scale);
}

void Trainer::Impl::gather_parameters() {
    if (!zero()) return;
    if (ep()) {
        ep_zero_gather(TrainPasses(model_).params(), {});
        return;
    }
    TrainPasses im(model_);
    Device& dev = model_.device();
    const int64_t cnt = shard_hi_ - shard_lo_;
    if (cnt > 0) dev.copy(pshard_.view(0, {cnt}), im.params().view(shard_lo_, {cnt}));
    const bool q8 = opts_.optimizer == OptimizerKind::adamw8bit;
    dist_.comm->all_gather(dev, pshard_, q8 ? im.params().view(0, {im.n_decay()}) : im.params());
}

void Trainer::Impl::gather_moments() {
    if (ep()) {
        ep_gather_state();
        return;
    }
    if (zero() && opts_.optimizer == OptimizerKind::adamw8bit && q_full_.empty()) {
        // The whole decayed range's codes and block scales from every rank's shard.
        const QuantizedMoments& d = q_[0];
        const int64_t nd = TrainPasses(model_).n_decay(), bs = shard_len_ / MT_QBLOCK;
        QuantizedMoments full{"decay", 0, nd, {}, {}, {}, {}};
        alloc_quantized(full, nd);
        Communicator& c = *dist_.comm;
        Device& dev = model_.device();
        c.all_gather(dev, d.m_codes, full.m_codes);
        c.all_gather(dev, d.v_codes, full.v_codes);
        c.all_gather(dev, d.m_absmax.view(0, {bs}), full.m_absmax);
        c.all_gather(dev, d.v_absmax.view(0, {bs}), full.v_absmax);
        q_full_ = {full, q_[1]};
        return;
    }
    if (!zero() || m_full_) return;
    Device& dev = model_.device();
    const int64_t n = model_.num_params();
    m_full_ = dev.alloc(DType::f32, {n});
    v_full_ = dev.alloc(DType::f32, {n});
    dist_.comm->all_gather(dev, m_, m_full_);
    dist_.comm->all_gather(dev, v_, v_full_);
}

void Trainer::Impl::scatter_moments() {
    if (ep()) {
        ep_scatter_state();
        return;
    }
    if (!q_full_.empty()) {  // this rank's blocks of the (possibly loaded) whole state
        const QuantizedMoments &full = q_full_[0], &d = q_[0];
        const int64_t cnt = d.n, blocks = (cnt + MT_QBLOCK - 1) / MT_QBLOCK,
                      b0 = shard_lo_ / MT_QBLOCK;
        Device& dev = model_.device();
        if (cnt > 0) {
            dev.copy(d.m_codes.view(0, {cnt}), full.m_codes.view(shard_lo_, {cnt}));
            dev.copy(d.v_codes.view(0, {cnt}), full.v_codes.view(shard_lo_, {cnt}));
            dev.copy(d.m_absmax.view(0, {blocks}), full.m_absmax.view(b0, {blocks}));
            dev.copy(d.v_absmax.view(0, {blocks}), full.v_absmax.view(b0, {blocks}));
        }
        q_full_.clear();
        return;
    }
    if (!m_full_) return;
    Device& dev = model_.device();
    const int64_t cnt = shard_hi_ - shard_lo_;
    if (cnt > 0) {
        dev.copy(m_.view(0, {cnt}), m_full_.view(shard_lo_, {cnt}));
        dev.copy(v_.view(0, {cnt}), v_full_.view(shard_lo_, {cnt}));
    }
    m_full_ = Tensor{};
    v_full_ = Tensor{};
}

int64_t Trainer::Impl::optimizer_state_bytes() const {
    int64_t b =
        static_cast<int64_t>(m_ ? m_.bytes() : 0) + static_cast<int64_t>(v_ ? v_.bytes() : 0);
    for (const QuantizedMoments& q : q_)
        for (const Tensor* t : {&q.m_codes, &q.v_codes, &q.m_absmax, &q.v_absmax})
            if (*t) b += static_cast<int64_t>(t->bytes());
    return b;
}

}  // namespace moetrain
