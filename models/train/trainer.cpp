// Training (MODEL.md 4): warmup + cosine learning rate (nanoGPT), gradient accumulation as the
// mean of A micro-batch gradients, the global gradient norm computed on the device, clipping
// and the AdamW / 8-bit AdamW / SGD update applied by the device ops (one AdamW call for the
// decayed tensors, one without weight decay for gains and biases). Loss terms and the squared
// norm share one small device buffer, downloaded once per step; a non-finite loss or norm
// stops the step before any parameter changes. In fp16 the loss gradient is scaled (dynamic
// loss scaling): overflowing gradients skip the step and halve the scale instead. After the
// update, the expert biases of an expert-bias MoE model move by their step's counts. Training over
// ranks is the gradient-sync strategy's (train/sync/): the core updates the segments it owns.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "model/train_passes.h"
#include "train/trainer_impl.h"
#include "shared/mt_math.h"

namespace moetrain {

static_assert(kAdamW8bitBlock == MT_QBLOCK, "train.h and the adamw8bit op agree on the block");

double lr_at(const TrainOptions& o, int64_t i) {
    const double min_lr = o.min_lr < 0 ? o.lr / 10.0 : o.min_lr;
    if (i < o.warmup) return o.lr * static_cast<double>(i + 1) / static_cast<double>(o.warmup);
    const double q = static_cast<double>(i - o.warmup) /
                     static_cast<double>(std::max<int64_t>(1, o.total_steps - o.warmup));
    // Past the end of the schedule the rate stays at min_lr (nanoGPT).
    return min_lr + 0.5 * (o.lr - min_lr) * (1.0 + std::cos(std::numbers::pi * std::min(q, 1.0)));
}

Trainer::Impl::Impl(Model& model, const TrainOptions& opts, const DistOptions& dist)
    : model_(model), opts_(opts) {
    MT_CHECK(opts.accum >= 1, "accum must be >= 1 (got ", opts.accum, ")");
    MT_CHECK(opts.lr >= 0 && std::isfinite(opts.lr), "lr must be finite and >= 0 (got ", opts.lr,
             ")");
    MT_CHECK(opts.warmup >= 0, "warmup must be >= 0 (got ", opts.warmup, ")");
    MT_CHECK(opts.total_steps >= 1, "total_steps must be >= 1 (got ", opts.total_steps, ")");
    if (opts.optimizer != OptimizerKind::sgd) {
        MT_CHECK(opts.b1 >= 0 && opts.b1 < 1, "b1 must be in [0, 1) (got ", opts.b1, ")");
        MT_CHECK(opts.b2 >= 0 && opts.b2 < 1, "b2 must be in [0, 1) (got ", opts.b2, ")");
        MT_CHECK(opts.eps > 0, "eps must be > 0 (got ", opts.eps, ")");
        MT_CHECK(opts.wd >= 0, "wd must be >= 0 (got ", opts.wd, ")");
    }
    Device& dev = model.device();
    sync_ =
        make_grad_sync(model, opts_, dist);  // owned: the ZeRO-1 shard, this rank's experts, ...
    if (opts.optimizer == OptimizerKind::adamw) {
        const int64_t n = sync_->moments_len();
        state_.m = dev.alloc(DType::f32, {n});
        state_.v = dev.alloc(DType::f32, {n});
    } else if (opts.optimizer == OptimizerKind::adamw8bit) {
        // Zero-filled codes and absmax are the zero moments (Device::adamw8bit). ZeRO-1: the
        // decayed range's state is this rank's block-aligned shard (allocated at the padded
        // shard length, so that every rank all-gathers the same count), the rest replicated.
        // Expert parallel: the model's buffers hold this rank's experts only, so its state
        // covers the non-expert weights and this rank's experts.
        const int64_t n = model.num_params(), nd = TrainPasses(model).n_decay();
        std::vector<QuantizedMoments>& q = state_.q;
        q = {{"decay", 0, nd, {}, {}, {}, {}}, {"no_decay", nd, n - nd, {}, {}, {}, {}}};
        if (const int64_t len = sync_->decay_state(q[0]); len > 0) alloc_quantized(dev, q[0], len);
        if (q[1].n > 0) alloc_quantized(dev, q[1], q[1].n);
    }
    MT_CHECK(opts.loss_scale_init >= 1 && std::isfinite(opts.loss_scale_init),
             "loss_scale_init must be finite and >= 1 (got ", opts.loss_scale_init, ")");
    MT_CHECK(opts.loss_scale_window >= 1, "loss_scale_window must be >= 1 (got ",
             opts.loss_scale_window, ")");
    loss_scale_ = opts.loss_scale_init;
    stats_ = TrainPasses(model).stats().view(3, {1});
}

void Trainer::Impl::set_loss_scale_state(double scale, int64_t clean, int64_t skipped) {
    MT_CHECK(scale > 0 && std::isfinite(scale), "loss scale must be finite and > 0 (got ", scale,
             ")");
    MT_CHECK(clean >= 0 && skipped >= 0, "loss scale step counts must be >= 0");
    loss_scale_ = scale;
    clean_steps_ = clean;
    skipped_steps_ = skipped;
}

StepStats Trainer::Impl::step(const int32_t* xs, const int32_t* ys, int B, int T) {
    MT_CHECK(xs && ys, "Trainer::step needs input and target tokens");
    TrainPasses im(model_);
    const int A = opts_.accum;
    const int64_t per = int64_t{B} * T;

    const bool dynamic = model_.precision() == Precision::fp16;
    const double scale = dynamic ? loss_scale_ : 1.0;

    sync_->sync_parameters();
    im.reset_stats();
    im.begin_step_counts();
    model_.zero_grads();
    int64_t tokens = 0;
    for (int a = 0; a < A; ++a) {
        if (a == A - 1) sync_->begin_last_micro_batch();  // its backward: the final gradients
        tokens += im.queue_micro_batch(xs + a * per, ys + a * per, B, T,
                                       static_cast<float>(scale / A), 1.0f / A);
    }
    sync_->reduce_gradients();  // over the ranks (ZeRO-1: this rank's shard); the squared norm
    const std::array<float, 4> s = im.read_stats();

    StepStats st;
    st.run = im.last_run();
    st.loss = TrainPasses::loss(s, tokens);
    st.grad_norm = std::sqrt(static_cast<double>(s[3])) / scale;
    st.lr = lr_at(opts_, step_);
    st.loss_scale = scale;
    st.step = step_;
    // A non-finite norm is an error, except in fp16 where it means the scaled gradients overflowed.
    MT_CHECK(std::isfinite(st.loss.loss) && (dynamic || std::isfinite(st.grad_norm)),
             "non-finite loss at step ", step_ + 1, " (loss ", st.loss.loss, ", grad norm ",
             st.grad_norm, "): update not applied");
    if (!std::isfinite(st.grad_norm)) {  // fp16 overflow: skip the step, halve the scale
        MT_CHECK(loss_scale_ > 1.0, "fp16 gradients overflow at step ", step_ + 1,
                 " even with loss scale 1: update not applied");
        loss_scale_ = std::max(1.0, loss_scale_ / 2);
        clean_steps_ = 0;
        ++skipped_steps_;
        st.skipped = true;
        return st;
    }
    update(st.lr, static_cast<float>(1.0 / scale));
    sync_->gather_parameters();  // ZeRO-1: every rank's updated shard to every rank
    im.params_changed();
    im.update_expert_bias();  // after the parameter update, from the step's counts (MODEL.md 2)
    ++step_;
    st.step = step_;
    if (dynamic && ++clean_steps_ >= opts_.loss_scale_window) {
        loss_scale_ = std::min(loss_scale_ * 2, 16777216.0);  // 2^24
        clean_steps_ = 0;
    }
    return st;
}

void Trainer::Impl::update(double step_lr, float inv_scale) {
    TrainPasses im(model_);
    Device& dev = model_.device();
    const int64_t n = im.n_params(), nd = im.n_decay();
    const float clip = opts_.clip > 0 ? static_cast<float>(opts_.clip) : 0.0f;
    const float lr = static_cast<float>(step_lr);
    const std::vector<Segment>& owned = sync_->owned();
    if (opts_.optimizer == OptimizerKind::sgd) {
        for (const Segment& seg : owned)  // expert parallel: not the other ranks' experts
            dev.sgd(im.params().view(seg.first, {seg.count}), sync_->gradient(seg.first, seg.count),
                    seg.count, lr, stats_, clip, inv_scale);
        return;
    }
    const double s1 = static_cast<double>(step_ + 1);
    AdamWArgs a;
    a.lr = lr;
    a.b1 = static_cast<float>(opts_.b1);
    a.b2 = static_cast<float>(opts_.b2);
    a.eps = static_cast<float>(opts_.eps);
    a.bc1 = static_cast<float>(1.0 - std::pow(opts_.b1, s1));
    a.bc2 = static_cast<float>(1.0 - std::pow(opts_.b2, s1));
    a.wd = static_cast<float>(opts_.wd);
    // Range r: the decayed tensors [0, nd), then the gains and biases without decay, each cut
    // to the segments this rank owns (the ZeRO-1 shard; expert parallel with ZeRO-1: its
    // shards' pieces; else everything, which under expert parallelism is the non-expert
    // weights and this rank's experts), with the gradients the strategy reduced for them. The
    // moments hold the owned segments back to back (the gains' and biases' 8-bit state is
    // whole: [nd, n) is owned by every rank).
    auto update_range = [&](size_t r, int64_t first, int64_t last) {
        int64_t at = 0;  // the segment's first element in the moments
        for (const Segment& seg : owned) {
            const int64_t off = std::max(first, seg.first),
                          cnt = std::min(last, seg.first + seg.count) - off, m = at;
            at += seg.count;
            if (cnt <= 0) continue;
            const Tensor p = im.params().view(off, {cnt}), g = sync_->gradient(off, cnt);
            if (opts_.optimizer == OptimizerKind::adamw) {
                const int64_t mo = m + off - seg.first;
                dev.adamw(p, g, state_.m.view(mo, {cnt}), state_.v.view(mo, {cnt}), cnt, a, stats_,
                          clip, inv_scale);
            } else {  // the segment's codes and scales (block-aligned, see above)
                const QuantizedMoments& q = state_.q[r];
                const int64_t qo = r == 0 ? m + off - seg.first : off - nd, b0 = qo / MT_QBLOCK,
                              blocks = (cnt + MT_QBLOCK - 1) / MT_QBLOCK;
                dev.adamw8bit(p, g, q.m_codes.view(qo, {cnt}), q.v_codes.view(qo, {cnt}),
                              q.m_absmax.view(b0, {blocks}), q.v_absmax.view(b0, {blocks}), cnt, a,
                              stats_, clip, inv_scale);
            }
        }
    };
    update_range(0, 0, nd);
    a.wd = 0.0f;
    update_range(1, nd, n);
}

int64_t Trainer::Impl::optimizer_state_bytes() const {
    int64_t b = static_cast<int64_t>(state_.m ? state_.m.bytes() : 0) +
                static_cast<int64_t>(state_.v ? state_.v.bytes() : 0);
    for (const QuantizedMoments& q : state_.q)
        for (const Tensor* t : {&q.m_codes, &q.v_codes, &q.m_absmax, &q.v_absmax})
            if (*t) b += static_cast<int64_t>(t->bytes());
    return b;
}

}  // namespace moetrain
