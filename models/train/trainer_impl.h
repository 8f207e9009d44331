// The Trainer's state behind api/moetrain/train.h (which shows only what an embedder uses):
// the optimizer state, the loss scale and the data / expert-parallel machinery.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "moetrain/train.h"

namespace moetrain {

struct Trainer::Impl {
    Impl(Model& model, const TrainOptions& opts, const DistOptions& dist);
    ~Impl();
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    StepStats step(const int32_t* xs, const int32_t* ys, int B, int T);
    void gather_moments();
    void scatter_moments();
    int64_t optimizer_state_bytes() const;
    void set_loss_scale_state(double scale, int64_t clean, int64_t skipped);

    Model& model_;
    TrainOptions opts_;
    int64_t step_ = 0;
    double loss_scale_ = 1;
    int64_t clean_steps_ = 0, skipped_steps_ = 0;
    Tensor m_, v_;
    std::vector<QuantizedMoments> q_;
    Tensor stats_;  // small device buffer: grad norm^2 etc.
    // Data parallel (trainer_dist.cpp).
    DistOptions dist_;
    bool dp() const { return dist_.comm && dist_.comm->size() > 1; }
    bool zero() const { return dp() && dist_.zero == 1; }
    bool synced_ = false;                   // rank 0's parameters broadcast (first step)
    int64_t shard_lo_ = 0, shard_hi_ = 0;   // this rank's ZeRO-1 range (everything without)
    int64_t shard_len_ = 0;                 // ceil(n / ranks): every rank's padded shard size
    Tensor gshard_, pshard_;                // ZeRO-1: reduced gradient / updated parameter shard
    Tensor m_full_, v_full_;                // between gather_moments and scatter_moments
    std::vector<QuantizedMoments> q_full_;  // 8-bit: the same for the quantized state
    // Elements [first, first + count) of the flat buffers.
    struct Segment {
        int64_t first = 0, count = 0;
    };
    // The elements this rank updates, in order; its moments hold them back to back (the whole
    // buffer; ZeRO-1: the shard; expert parallel: the non-expert weights and its experts).
    std::vector<Segment> owned_;
    // Expert parallel (trainer_dist.cpp): this rank's group and the ranks holding its experts.
    std::unique_ptr<Communicator> ep_group_, ep_replicas_;
    std::vector<Segment> shared_, mine_;  // non-expert ranges; this rank's expert tensors
    Tensor ep_sq_;  // squared norm of this rank's expert gradients, summed over its group
    bool ep() const { return dp() && dist_.expert_parallel > 1; }
    void setup_expert_parallel();
    // 8-bit AdamW: refuses (one line) expert blocks whose edges are not block boundaries.
    void check_expert_blocks_aligned() const;
    // Expert parallel (trainer_ep_state.cpp): gather_moments / scatter_moments, with the model
    // laid out whole in between (shard_layout_: the rank's own layout meanwhile).
    std::vector<ParamInfo> shard_layout_;
    void ep_gather_state();
    void ep_scatter_state();
    // Overlap of the gradient all-reduce with the backward (trainer_dist.cpp): the host copy
    // the non-blocking all-reduces run on, and their ids.
    std::vector<float> hgrads_;
    std::vector<int64_t> pending_;
    bool overlap() const;
    void begin_overlap();  // before the last micro-batch: every layer starts its all-reduce
    void start_reduce(int layer);
    // Copies the owned segments of `full` into / out of the compact `part` (m_, v_).
    void owned_copy(const Tensor& full, const Tensor& part, bool to_full);
    // Expert parallel with ZeRO-1 (trainer_ep_zero.cpp): every non-expert segment is sharded
    // over all ranks, every segment of this rank's experts over the ranks holding them, each
    // in equal pieces; owned_ is this rank's pieces in that order (the moments hold them so).
    struct ShardedSegment {
        Segment whole;
        Communicator* over = nullptr;  // the ranks sharing its pieces
        int64_t len = 0;               // every rank's piece: ceil(whole.count / ranks)
        Segment piece;                 // this rank's (count < len at the end, possibly 0)
        int64_t at = 0;                // the piece's first element in the moments
    };
    std::vector<ShardedSegment> sharded_;
    Tensor staged_;  // one piece
    void setup_ep_zero();
    void ep_zero_reduce();  // gradients into this rank's pieces of the flat buffer; the norm
    // Every rank's pieces of `flat` (or, with `compact`, of the moments m_ / v_) into `flat`.
    void ep_zero_gather(const Tensor& flat, const Tensor& compact);
    void setup_dist();
    void alloc_quantized(QuantizedMoments& q, int64_t elems);  // zero codes and scales
    // ZeRO-1 with 8-bit AdamW: the update of this rank's decayed shard and of the replicated
    // gains and biases.
    void update_zero8(AdamWArgs a, float clip, float inv_scale);
    void sync_parameters();    // first step: every rank starts from rank 0's parameters
    void reduce_gradients();   // after the micro-batches: gradients and loss terms summed
    void gather_parameters();  // ZeRO-1: every rank's updated shard to every rank
};

}  // namespace moetrain
