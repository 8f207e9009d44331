// Expert parallelism and checkpoints (docs/DISTRIBUTED.md): a rank's model and optimizer state
// hold the non-expert weights and its own block of experts (ExpertShard), while a checkpoint
// holds the whole model. gather_state lays the model out whole (every rank's expert blocks
// all-gathered over the group) and assembles the whole moments or 8-bit state the same way
// (under ZeRO-1 first from every rank's pieces); scatter_state keeps this rank's block of
// both again, loaded values included. The 8-bit block scales move with their codes: every
// edge between a non-expert run and an expert block lies on the 256-element grid
// (check_expert_blocks_aligned), so a run's blocks are whole blocks of the whole state.
#include "model/expert_shard.h"
#include "model/train_passes.h"
#include "shared/mt_math.h"
#include "train/sync/sync_ep.h"

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

void ExpertParallelSync::gather_state(OptimizerState& s) {
    if (!shard_layout_.empty()) return;  // already whole
    TrainPasses im(model_);
    Device& dev = model_.device();
    Communicator& group = *group_;
    shard_layout_ = im.layout();
    const int64_t n_local = im.n_params(), nd_local = im.n_decay();
    im.set_whole_experts(true);
    const std::vector<ShardRun> runs = shard_runs(shard_layout_, im.layout());
    const int64_t n = im.n_params(), nd = im.n_decay();
    auto whole = [&](const Tensor& compact) {
        const Tensor local = gather_pieces(compact, n_local);
        Tensor out = dev.alloc(DType::f32, {n});
        shard_to_whole(dev, group, runs, local, out);
        return out;
    };
    if (s.m) {
        s.m_full = whole(s.m);
        s.v_full = whole(s.v);
    }
    if (!s.q.empty()) {
        const QuantizedMoments& d = s.q[0];
        QuantizedMoments full{"decay", 0, nd, {}, {}, {}, {}};
        alloc_quantized(dev, full, nd);
        each_quantized(d, full, nd_local, [&](const Tensor& l, const Tensor& w, ShardSpan sp) {
            shard_to_whole(dev, group, runs, l, w, sp);
        });
        QuantizedMoments rest = s.q[1];  // the gains and biases: the same state, after nd
        rest.offset = nd;
        s.q_full = {full, rest};
    }
}

void ExpertParallelSync::scatter_state(OptimizerState& s) {
    if (shard_layout_.empty()) return;
    TrainPasses im(model_);
    Device& dev = model_.device();
    const std::vector<ParamInfo> whole_layout = im.layout();
    im.set_whole_experts(false);  // the parameters: this rank's block again
    const std::vector<ShardRun> runs = shard_runs(im.layout(), whole_layout);
    const int index = group_->rank();
    const int64_t n_local = im.n_params(), nd_local = im.n_decay();
    auto keep = [&](const Tensor& full, const Tensor& compact) {
        const Tensor local = layout_buffer(compact, n_local);
        whole_to_shard(dev, index, runs, full, local);
        keep_pieces(local, compact);
    };
    if (s.m_full) {
        keep(s.m_full, s.m);
        keep(s.v_full, s.v);
    }
    if (!s.q_full.empty()) {  // q[1] is q_full[1]'s tensors, loaded in place
        const QuantizedMoments &full = s.q_full[0], &d = s.q[0];
        each_quantized(d, full, nd_local, [&](const Tensor& l, const Tensor& w, ShardSpan sp) {
            whole_to_shard(dev, index, runs, w, l, sp);
        });
    }
    s.m_full = s.v_full = Tensor{};
    s.q_full.clear();
    shard_layout_.clear();
}

}  // namespace moetrain
