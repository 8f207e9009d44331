// A gradient-sync and optimizer-shard strategy (docs/ARCHITECTURE.md, "How a step flows"): what
// the Trainer core calls between the micro-batches and the optimizer update, and around a
// checkpoint. One strategy per way of training over ranks, each in its own file:
//  - sync_replicated: one process, or data parallel (gradients all-reduced, every rank updates
//    everything);
//  - sync_zero: ZeRO-1 (gradients reduce-scattered, each rank updates its shard of the flat
//    buffer, parameters all-gathered);
//  - sync_ep: expert parallel (each rank holds its own experts);
//  - sync_ep_zero: expert parallel with ZeRO-1.
// The core updates the segments of the flat buffers the strategy says this rank owns, with
// the gradients the strategy hands it; the optimizer state holds the owned segments back to
// back.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "moetrain/train.h"

namespace moetrain {

// Elements [first, first + count) of the flat buffers.
struct Segment {
    int64_t first = 0, count = 0;
};

// The optimizer state of a Trainer: AdamW moments or the 8-bit state, and between
// gather_state and scatter_state the whole ones (checkpoints save and load those).
struct OptimizerState {
    Tensor m, v;
    std::vector<QuantizedMoments> q;
    Tensor m_full, v_full;
    std::vector<QuantizedMoments> q_full;
};

// Zero codes and scales for `elems` elements.
void alloc_quantized(Device& dev, QuantizedMoments& q, int64_t elems);

class GradSync {
  public:
    virtual ~GradSync() = default;
    GradSync(const GradSync&) = delete;
    GradSync& operator=(const GradSync&) = delete;

    // The elements this rank updates, in order (the optimizer state holds them back to back).
    const std::vector<Segment>& owned() const { return owned_; }
    // The train.h shard: [first, first + count) of the flat buffers.
    int64_t shard_first() const { return shard_lo_; }
    int64_t shard_count() const { return shard_hi_ - shard_lo_; }
    // AdamW: elements of each moment buffer (the owned segments, or a padded shard).
    virtual int64_t moments_len() const;
    // 8-bit AdamW: cuts the decayed range's state `d` to this rank's part; the elements to
    // allocate (0: none).
    virtual int64_t decay_state(QuantizedMoments& d) const { return d.n; }
    // Whether the gradient all-reduce overlaps the backward.
    virtual bool overlaps() const { return false; }

    // Before the first step's micro-batches: every rank starts from rank 0's parameters.
    void sync_parameters();
    // Before the last micro-batch (its backward writes the final gradients).
    virtual void begin_last_micro_batch() {}
    // After the micro-batches: gradients and loss terms summed over the ranks, the squared
    // global gradient norm in stats()[3].
    virtual void reduce_gradients() = 0;
    // The reduced gradients of elements [first, first + count) of an owned segment.
    virtual Tensor gradient(int64_t first, int64_t count) const;
    // After the update: every rank's updated parameters to the ranks that hold them.
    virtual void gather_parameters() {}
    // Checkpoints (collectives): the whole optimizer state on every rank, then this rank's
    // part of it again (loaded values included).
    virtual void gather_state(OptimizerState& /*s*/) {}
    virtual void scatter_state(OptimizerState& /*s*/) {}

  protected:
    GradSync(Model& model, const TrainOptions& opts, const DistOptions& dist);
    bool dp() const { return dist_.comm && dist_.comm->size() > 1; }
    // sync_parameters' broadcast (data parallel only): the whole flat buffer from rank 0.
    virtual void broadcast_parameters();
    Model& model_;
    const TrainOptions& opts_;
    DistOptions dist_;
    Tensor stats_;  // the squared gradient norm (the Trainer's device stats, element 3)
    std::vector<Segment> owned_;
    int64_t shard_lo_ = 0, shard_hi_ = 0;

  private:
    bool synced_ = false;
};

// ZeRO-1 strategies: refuses (one line) an optimizer without state to shard.
void check_zero_optimizer(const TrainOptions& opts);

// The strategy `dist` asks for (checks its options; one line names what is wrong).
std::unique_ptr<GradSync> make_grad_sync(Model& model, const TrainOptions& opts,
                                         const DistOptions& dist);

}  // namespace moetrain
