// ZeRO-1 (sync_zero.h).
#include "train/sync/sync_zero.h"

#include <algorithm>

#include "model/train_passes.h"
#include "shared/mt_math.h"

namespace moetrain {

ZeroSync::ZeroSync(Model& model, const TrainOptions& opts, const DistOptions& dist)
    : GradSync(model, opts, dist) {
    check_zero_optimizer(opts);
    const int64_t n = model_.num_params();
    const int R = dist_.comm->size(), r = dist_.comm->rank();
    if (q8()) {
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

int64_t ZeroSync::decay_state(QuantizedMoments& d) const {
    d = {"decay", shard_lo_, shard_hi_ - shard_lo_, {}, {}, {}, {}};
    return shard_len_;  // padded, so that every rank all-gathers the same count
}

void ZeroSync::reduce_gradients() {
    TrainPasses im(model_);
    Device& dev = model_.device();
    Communicator& c = *dist_.comm;
    const int64_t n = im.n_params();
    c.all_reduce(dev, im.stats().view(0, {3}), ReduceOp::sum);      // ce, aux, z
    const int64_t sharded = q8() ? im.n_decay() : n;                // 8-bit: the decayed range only
    c.reduce_scatter(dev, im.grads().view(0, {sharded}), gshard_);  // padding reads as 0
    dev.sum_squares(stats_, gshard_, shard_len_, false);
    c.all_reduce(dev, stats_, ReduceOp::sum);
    if (!q8() || sharded == n) return;
    const Tensor rest = im.grads().view(sharded, {n - sharded});  // replicated: all-reduced
    c.all_reduce(dev, rest, ReduceOp::sum);
    dev.sum_squares(stats_, rest, n - sharded, true);
}

Tensor ZeroSync::gradient(int64_t first, int64_t count) const {
    // The shard's reduced gradients start at element shard_lo_ of gshard_; the replicated
    // gains and biases (8-bit, after the shard) are all-reduced in place.
    if (first < shard_hi_) return gshard_.view(first - shard_lo_, {count});
    return GradSync::gradient(first, count);
}

void ZeroSync::gather_parameters() {
    TrainPasses im(model_);
    Device& dev = model_.device();
    const int64_t cnt = shard_hi_ - shard_lo_;
    if (cnt > 0) dev.copy(pshard_.view(0, {cnt}), im.params().view(shard_lo_, {cnt}));
    dist_.comm->all_gather(dev, pshard_, q8() ? im.params().view(0, {im.n_decay()}) : im.params());
}

void ZeroSync::gather_state(OptimizerState& s) {
    Communicator& c = *dist_.comm;
    Device& dev = model_.device();
    if (q8()) {
        if (!s.q_full.empty()) return;
        // The whole decayed range's codes and block scales from every rank's shard.
        const QuantizedMoments& d = s.q[0];
        const int64_t nd = TrainPasses(model_).n_decay(), bs = shard_len_ / MT_QBLOCK;
        QuantizedMoments full{"decay", 0, nd, {}, {}, {}, {}};
        alloc_quantized(dev, full, nd);
        c.all_gather(dev, d.m_codes, full.m_codes);
        c.all_gather(dev, d.v_codes, full.v_codes);
        c.all_gather(dev, d.m_absmax.view(0, {bs}), full.m_absmax);
        c.all_gather(dev, d.v_absmax.view(0, {bs}), full.v_absmax);
        s.q_full = {full, s.q[1]};
        return;
    }
    if (s.m_full) return;
    const int64_t n = model_.num_params();
    s.m_full = dev.alloc(DType::f32, {n});
    s.v_full = dev.alloc(DType::f32, {n});
    c.all_gather(dev, s.m, s.m_full);
    c.all_gather(dev, s.v, s.v_full);
}

void ZeroSync::scatter_state(OptimizerState& s) {
    Device& dev = model_.device();
    const int64_t cnt = shard_hi_ - shard_lo_;
    if (!s.q_full.empty()) {  // this rank's blocks of the (possibly loaded) whole state
        const QuantizedMoments &full = s.q_full[0], &d = s.q[0];
        const int64_t blocks = (cnt + MT_QBLOCK - 1) / MT_QBLOCK, b0 = shard_lo_ / MT_QBLOCK;
        if (cnt > 0) {
            dev.copy(d.m_codes.view(0, {cnt}), full.m_codes.view(shard_lo_, {cnt}));
            dev.copy(d.v_codes.view(0, {cnt}), full.v_codes.view(shard_lo_, {cnt}));
            dev.copy(d.m_absmax.view(0, {blocks}), full.m_absmax.view(b0, {blocks}));
            dev.copy(d.v_absmax.view(0, {blocks}), full.v_absmax.view(b0, {blocks}));
        }
        s.q_full.clear();
        return;
    }
    if (!s.m_full) return;
    if (cnt > 0) {
        dev.copy(s.m.view(0, {cnt}), s.m_full.view(shard_lo_, {cnt}));
        dev.copy(s.v.view(0, {cnt}), s.v_full.view(shard_lo_, {cnt}));
    }
    s.m_full = Tensor{};
    s.v_full = Tensor{};
}

}  // namespace moetrain
