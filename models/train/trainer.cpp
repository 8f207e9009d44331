// Training (MODEL.md 4): warmup + cosine learning rate (nanoGPT), gradient accumulation as the
// mean of A micro-batch gradients, the global gradient norm computed on the device, clipping
// and the AdamW / 8-bit AdamW / SGD update applied by the device ops (one AdamW call for the
// decayed tensors, one without weight decay for gains and biases). Loss terms and the squared
// norm share one small device buffer, downloaded once per step; a non-finite loss or norm
// stops the step before any parameter changes. In fp16 the loss gradient is scaled (dynamic
// loss scaling): overflowing gradients skip the step and halve the scale instead. After the
// update, the expert biases of an expert-bias MoE model move by their step's counts.
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
    : model_(model), opts_(opts), dist_(dist) {
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
    setup_dist();  // owned_: the ZeRO-1 shard, this rank's experts, or everything
    if (opts.optimizer == OptimizerKind::adamw) {
        int64_t n = 0;
        for (const Segment& seg : owned_) n += seg.count;
        if (zero() && !ep()) n = shard_len_;  // padded: every rank all-gathers as many elements
        m_ = dev.alloc(DType::f32, {n});
        v_ = dev.alloc(DType::f32, {n});
    } else if (opts.optimizer == OptimizerKind::adamw8bit) {
        // Zero-filled codes and absmax are the zero moments (Device::adamw8bit). ZeRO-1: the
        // decayed range's state is this rank's block-aligned shard (allocated at the padded
        // shard length, so that every rank all-gathers the same count), the rest replicated.
        // Expert parallel: the model's buffers hold this rank's experts only, so its state
        // covers the non-expert weights and this rank's experts.
        const int64_t n = model.num_params(), nd = TrainPasses(model).n_decay();
        q_ = {{"decay", 0, nd, {}, {}, {}, {}}, {"no_decay", nd, n - nd, {}, {}, {}, {}}};
        if (zero()) q_[0] = {"decay", shard_lo_, shard_hi_ - shard_lo_, {}, {}, {}, {}};
        if (zero())
            alloc_quantized(q_[0], shard_len_);
        else if (q_[0].n > 0)
            alloc_quantized(q_[0], q_[0].n);
        if (q_[1].n > 0) alloc_quantized(q_[1], q_[1].n);
    }
    MT_CHECK(opts.loss_scale_init >= 1 && std::isfinite(opts.loss_scale_init),
             "loss_scale_init must be finite and >= 1 (got ", opts.loss_scale_init, ")");
    MT_CHECK(opts.loss_scale_window >= 1, "loss_scale_window must be >= 1 (got ",
             opts.loss_scale_window, ")");
    loss_scale_ = opts.loss_scale_init;
    stats_ = TrainPasses(model).stats().view(3, {1});
}

void Trainer::Impl::alloc_quantized(QuantizedMoments& q, int64_t elems) {
    Device& dev = model_.device();
    const int64_t blocks = (elems + MT_QBLOCK - 1) / MT_QBLOCK;
    q.m_codes = dev.alloc(DType::u8, {elems});
    q.v_codes = dev.alloc(DType::u8, {elems});
    q.m_absmax = dev.alloc(DType::f32, {blocks});
    q.v_absmax = dev.alloc(DType::f32, {blocks});
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
    MT_CHECK(xs && ys, "Trainer::Impl::step needs input and target tokens");
    TrainPasses im(model_);
    Device& dev = model_.device();
    const int A = opts_.accum;
    const int64_t per = int64_t{B} * T, n = im.n_params(), nd = im.n_decay();

    const bool dynamic = model_.precision() == Precision::fp16;
    const double scale = dynamic ? loss_scale_ : 1.0;
    const float inv_scale = static_cast<float>(1.0 / scale);

    sync_parameters();
    im.reset_stats();
    im.begin_step_counts();
    model_.zero_grads();
    int64_t tokens = 0;
    for (int a = 0; a < A; ++a) {
        if (a == A - 1) begin_overlap();  // the last backward writes the final gradients
        tokens += im.queue_micro_batch(xs + a * per, ys + a * per, B, T,
                                       static_cast<float>(scale / A), 1.0f / A);
    }
    reduce_gradients();  // data parallel: sums over the ranks (ZeRO-1: this rank's shard)
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

    const float clip = opts_.clip > 0 ? static_cast<float>(opts_.clip) : 0.0f;
    const float lr = static_cast<float>(st.lr);
    if (opts_.optimizer != OptimizerKind::sgd) {
        const double s1 = static_cast<double>(step_ + 1);
        AdamWArgs a;
        a.lr = lr;
        a.b1 = static_cast<float>(opts_.b1);
        a.b2 = static_cast<float>(opts_.b2);
        a.eps = static_cast<float>(opts_.eps);
        a.bc1 = static_cast<float>(1.0 - std::pow(opts_.b1, s1));
        a.bc2 = static_cast<float>(1.0 - std::pow(opts_.b2, s1));
        a.wd = static_cast<float>(opts_.wd);
        // Range r: the decayed tensors [0, nd), then the gains and biases without decay, each
        // cut to the segments this rank owns (the ZeRO-1 shard [lo, hi), whose gradients start
        // at element lo of gshard_; expert parallel with ZeRO-1: its shards' pieces, their
        // reduced gradients back in the flat buffer; else everything, which under expert
        // parallelism is the non-expert weights and this rank's experts). The moments hold the
        // owned segments back to back (the gains' and biases' 8-bit state is whole: [nd, n) is
        // owned by every rank).
        const bool in_shard = zero() && !ep();
        const int64_t base = in_shard ? shard_lo_ : 0;
        const Tensor gsrc = in_shard ? gshard_ : im.grads();
        auto update = [&](size_t r, int64_t first, int64_t last) {
            int64_t at = 0;  // the segment's first element in the moments
            for (const Segment& seg : owned_) {
                const int64_t off = std::max(first, seg.first),
                              cnt = std::min(last, seg.first + seg.count) - off, m = at;
                at += seg.count;
                if (cnt <= 0) continue;
                const Tensor p = im.params().view(off, {cnt}), g = gsrc.view(off - base, {cnt});
                if (opts_.optimizer == OptimizerKind::adamw) {
                    const int64_t mo = m + off - seg.first;
                    dev.adamw(p, g, m_.view(mo, {cnt}), v_.view(mo, {cnt}), cnt, a, stats_, clip,
                              inv_scale);
                } else {  // the segment's codes and scales (block-aligned, see above)
                    const QuantizedMoments& q = q_[r];
                    const int64_t qo = r == 0 ? m + off - seg.first : off - nd, b0 = qo / MT_QBLOCK,
                                  blocks = (cnt + MT_QBLOCK - 1) / MT_QBLOCK;
                    dev.adamw8bit(p, g, q.m_codes.view(qo, {cnt}), q.v_codes.view(qo, {cnt}),
                                  q.m_absmax.view(b0, {blocks}), q.v_absmax.view(b0, {blocks}), cnt,
                                  a, stats_, clip, inv_scale);
                }
            }
        };
        if (zero() && opts_.optimizer == OptimizerKind::adamw8bit) {
            update_zero8(a, clip, inv_scale);
        } else {
            update(0, 0, nd);
            a.wd = 0.0f;
            update(1, nd, n);
        }
    } else {
        for (const Segment& seg : owned_)  // expert parallel: not the other ranks' experts
            dev.sgd(im.params().view(seg.first, {seg.count}),
                    im.grads().view(seg.first, {seg.count}), seg.count, lr, stats_, clip,
                    inv_scale);
    }
    gather_parameters();
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

}  // namespace moetrain
