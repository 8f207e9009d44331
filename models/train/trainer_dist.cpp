// The data-parallel parts of the Trainer (docs/DISTRIBUTED.md): parameter broadcast before the
// first step, the bucketed gradient all-reduce and the loss terms summed over the ranks, and
// ZeRO-1: the gradients reduce-scattered into each rank's shard, the global gradient norm from
// the shards' squared norms, the parameter all-gather after the shard updates, and the moments
// gathered for checkpoints and scattered after loading them.
#include <algorithm>

#include "model/model_impl.h"
#include "moetrain/train.h"

namespace moetrain {

void Trainer::setup_dist() {
    const int64_t n = model_.num_params();
    shard_lo_ = 0;
    shard_hi_ = n;
    if (!dp()) return;
    MT_CHECK(dist_.zero == 0 || dist_.zero == 1, "--zero ", dist_.zero, ": only 0 and 1 exist");
    MT_CHECK(dist_.bucket_elems >= 1, "gradient bucket size must be >= 1");
    ModelImpl& im = model_.impl();
    im.dp_comm = dist_.comm;
    if (!zero()) return;
    MT_CHECK(opts_.optimizer == OptimizerKind::adamw, "--zero 1 shards the AdamW moments; ",
             optimizer_name(opts_.optimizer),
             opts_.optimizer == OptimizerKind::sgd ? " has no optimizer state to shard"
                                                   : " states are not sharded (use --zero 0)");
    const int R = dist_.comm->size(), r = dist_.comm->rank();
    shard_len_ = (n + R - 1) / R;
    shard_lo_ = std::min<int64_t>(n, r * shard_len_);
    shard_hi_ = std::min<int64_t>(n, shard_lo_ + shard_len_);
    Device& dev = im.dev;
    gshard_ = dev.alloc(DType::f32, {shard_len_});
    pshard_ = dev.alloc(DType::f32, {shard_len_});
}

void Trainer::sync_parameters() {
    if (!dp() || synced_) return;
    ModelImpl& im = model_.impl();
    dist_.comm->broadcast(im.dev, im.params, 0);
    im.params_changed();
    synced_ = true;
}

void Trainer::reduce_gradients() {
    ModelImpl& im = model_.impl();
    Device& dev = im.dev;
    const int64_t n = im.n_params;
    if (!dp()) {
        dev.sum_squares(stats_, im.grads, n, false);
        return;
    }
    Communicator& c = *dist_.comm;
    c.all_reduce(dev, im.stats.view(0, {3}), ReduceOp::sum);  // ce, aux, z: sums of shares
    if (!zero()) {
        for (int64_t off = 0; off < n; off += dist_.bucket_elems)
            c.all_reduce(dev, im.grads.view(off, {std::min(dist_.bucket_elems, n - off)}),
                         ReduceOp::sum);
        dev.sum_squares(stats_, im.grads, n, false);
        return;
    }
    c.reduce_scatter(dev, im.grads, gshard_);  // the last shard's padding reads as 0
    dev.sum_squares(stats_, gshard_, shard_len_, false);
    c.all_reduce(dev, stats_, ReduceOp::sum);
}

void Trainer::gather_parameters() {
    if (!zero()) return;
    ModelImpl& im = model_.impl();
    Device& dev = im.dev;
    const int64_t cnt = shard_hi_ - shard_lo_;
    if (cnt > 0) dev.copy(pshard_.view(0, {cnt}), im.params.view(shard_lo_, {cnt}));
    dist_.comm->all_gather(dev, pshard_, im.params);
}

void Trainer::gather_moments() {
    if (!zero() || m_full_) return;
    Device& dev = model_.device();
    const int64_t n = model_.num_params();
    m_full_ = dev.alloc(DType::f32, {n});
    v_full_ = dev.alloc(DType::f32, {n});
    dist_.comm->all_gather(dev, m_, m_full_);
    dist_.comm->all_gather(dev, v_, v_full_);
}

void Trainer::scatter_moments() {
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

int64_t Trainer::optimizer_state_bytes() const {
    int64_t b =
        static_cast<int64_t>(m_ ? m_.bytes() : 0) + static_cast<int64_t>(v_ ? v_.bytes() : 0);
    for (const QuantizedMoments& q : q_)
        for (const Tensor* t : {&q.m_codes, &q.v_codes, &q.m_absmax, &q.v_absmax})
            if (*t) b += static_cast<int64_t>(t->bytes());
    return b;
}

}  // namespace moetrain
