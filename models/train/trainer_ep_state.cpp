// Expert parallelism and checkpoints (docs/DISTRIBUTED.md): a rank's model and optimizer state
// hold the non-expert weights and its own block of experts (ExpertShard), while a checkpoint
// holds the whole model. gather_moments lays the model out whole (every rank's expert blocks
// all-gathered over the group) and assembles the whole moments or 8-bit state the same way
// (under ZeRO-1 first from every rank's pieces); scatter_moments keeps this rank's block of
// both again, loaded values included. The 8-bit block scales move with their codes: every
// edge between a non-expert run and an expert block lies on the 256-element grid
// (check_expert_blocks_aligned), so a run's blocks are whole blocks of the whole state.
#include "model/expert_shard.h"
#include "model/train_passes.h"
#include "train/trainer_impl.h"
#include "shared/mt_math.h"

namespace moetrain {
namespace {

// Calls f(a's tensor, b's tensor, span) for the codes and the block scales of two 8-bit states
// whose flat range is the decayed range [0, nd_local) of a rank's buffer.
template <class F>
void each_quantized(const QuantizedMoments& a, const QuantizedMoments& b, int64_t nd_local, F f) {
    const ShardSpan codes{1, nd_local}, scales{MT_QBLOCK, nd_local};
    f(a.m_codes, b.m_codes, codes);
    f(a.v_codes, b.v_codes, codes);
    f(a.m_absmax, b.m_absmax, scales);
    f(a.v_absmax, b.v_absmax, scales);
}

}  // namespace

void Trainer::Impl::ep_gather_state() {
    if (!shard_layout_.empty()) return;  // already whole
    TrainPasses im(model_);
    Device& dev = model_.device();
    Communicator& group = *ep_group_;
    shard_layout_ = im.layout();
    const int64_t n_local = im.n_params(), nd_local = im.n_decay();
    im.set_whole_experts(true);
    const std::vector<ShardRun> runs = shard_runs(shard_layout_, im.layout());
    const int64_t n = im.n_params(), nd = im.n_decay();
    auto whole = [&](const Tensor& compact) {
        Tensor local = compact;
        if (zero()) {  // every rank's pieces of this rank's layout first
            local = dev.alloc(DType::f32, {n_local});
            ep_zero_gather(local, compact);
        }
        Tensor out = dev.alloc(DType::f32, {n});
        shard_to_whole(dev, group, runs, local, out);
        return out;
    };
    if (m_) {
        m_full_ = whole(m_);
        v_full_ = whole(v_);
    }
    if (!q_.empty()) {
        const QuantizedMoments& d = q_[0];
        QuantizedMoments full{"decay", 0, nd, {}, {}, {}, {}};
        alloc_quantized(full, nd);
        each_quantized(d, full, nd_local, [&](const Tensor& l, const Tensor& w, ShardSpan s) {
            shard_to_whole(dev, group, runs, l, w, s);
        });
        QuantizedMoments rest = q_[1];  // the gains and biases: the same state, after nd
        rest.offset = nd;
        q_full_ = {full, rest};
    }
}

void Trainer::Impl::ep_scatter_state() {
    if (shard_layout_.empty()) return;
    TrainPasses im(model_);
    Device& dev = model_.device();
    const std::vector<ParamInfo> whole_layout = im.layout();
    im.set_whole_experts(false);  // the parameters: this rank's block again
    const std::vector<ShardRun> runs = shard_runs(im.layout(), whole_layout);
    const int index = ep_group_->rank();
    const int64_t n_local = im.n_params(), nd_local = im.n_decay();
    auto keep = [&](const Tensor& full, const Tensor& compact) {
        if (!zero()) {
            whole_to_shard(dev, index, runs, full, compact);
            return;
        }
        const Tensor local = dev.alloc(DType::f32, {n_local});
        whole_to_shard(dev, index, runs, full, local);
        owned_copy(local, compact, false);  // ZeRO-1: this rank's pieces
    };
    if (m_full_) {
        keep(m_full_, m_);
        keep(v_full_, v_);
    }
    if (!q_full_.empty()) {  // q_[1] is q_full_[1]'s tensors, loaded in place
        const QuantizedMoments &full = q_full_[0], &d = q_[0];
        each_quantized(d, full, nd_local, [&](const Tensor& l, const Tensor& w, ShardSpan s) {
            whole_to_shard(dev, index, runs, w, l, s);
        });
    }
    m_full_ = v_full_ = Tensor{};
    q_full_.clear();
    shard_layout_.clear();
}

}  // namespace moetrain
