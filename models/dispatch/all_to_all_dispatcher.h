// The all-to-all token dispatcher (dispatchers.h), expert parallel: the E experts are split
// over the P ranks of an expert-parallel group (docs/DISTRIBUTED.md), rank j holding experts
// [j E/P, (j + 1) E/P). Per layer and micro-batch every rank downloads its expert counts [E]
// and the group all-gathers them (P x E i32 on the host), so each rank knows how many of its
// sorted rows go to every owner and how many rows it receives from every source for each of its
// experts. The rows sorted by expert are already in blocks by owner, so a.xg is the send buffer
// as it is; the received rows come in blocks by source, each sorted by local expert, and the
// experts run once per source block (the weight of group e is local expert e in every block).
// Outputs go back the reverse way into a.yrows, in the order the combine reads. The backward
// sends g.drows the same way, runs the experts' backward per block in source order (the weight
// gradients of the local experts add up over the blocks in that order) and returns g.dxg.
//
// Two ways to move the rows, with the same results bit for bit:
// - plain (all_to_all_dispatcher.cpp): each exchange is one blocking all_to_all_v;
// - overlapped (all_to_all_overlap.cpp): the forward starts the exchange of the rows, runs the
//   experts over the rows this rank routed to itself while the others travel, then the rest;
//   the backward runs the layer's `meanwhile` work (the shared experts) while the output-row
//   gradients travel.
#pragma once

#include <vector>

#include "dispatch/dispatchers.h"

namespace moetrain {

class AllToAllDispatcher final : public TokenDispatcher {
  public:
    AllToAllDispatcher(const ModelConfig& c, Communicator& group, bool overlap);

    const char* name() const override;
    int64_t local_experts() const override { return n_local_; }
    void plan(Device& dev, int64_t N, DType xg, int moe_layers) override;
    void forward(Device& dev, int moe_layer, const MoeActs& a, int64_t rows,
                 const Experts& experts) override;
    void backward(Device& dev, int moe_layer, const MoeActs& a, const GradScratch& g, int64_t rows,
                  const ExpertsBackward& experts, const std::function<void()>& meanwhile) override;

  private:
    // One MoE layer's state. The rows this rank receives arrive in blocks by source rank, each
    // sorted by local expert. Their number depends on the routing: N k per rank when the
    // router is balanced, at most P N min(k, E/P) (every token of the group routed here); the
    // buffers start at the balanced size and grow (outside any recorded step: these passes run
    // eagerly) when a micro-batch needs more.
    struct LayerRows {
        int64_t rows = 0;  // capacity of xr, yr, acts
        Tensor xr;         // received input rows [rows, D] (MoeActs::xg's dtype)
        Tensor yr;         // this rank's expert outputs over them [rows, D] f32
        FfnActs acts;      // the experts' activations over them [rows, F] f32
        Tensor counts;     // i32 [P, n_local]: rows from source s for local expert e
        std::vector<int64_t> send_rows, recv_rows;    // per rank of the group, from the forward
        std::vector<int64_t> send_first, recv_first;  // their first rows (prefix sums)
    };
    // Backward scratch shared by the MoE layers: the gradients of the received rows.
    struct GradRows {
        int64_t rows = 0;       // capacity
        Tensor dyr, dxr;        // received output-row / returned input-row gradients [rows, D]
        Tensor dh, dgate, dup;  // the experts' hidden gradients [rows, F]
    };

    LayerRows& layer(int moe_layer);
    void reserve_rows(Device& dev, LayerRows& d, int64_t rows) const;
    void reserve_grads(Device& dev, int64_t rows);
    // The counts of this micro-batch: rows sent to every owner, rows received from every
    // source (and per local expert, uploaded for the grouped products).
    void exchange_counts(Device& dev, const MoeActs& a, LayerRows& d) const;
    // Blocking all_to_all_v of rows of width d_model over the group.
    void exchange_rows(Device& dev, const Tensor& send, const std::vector<int64_t>& send_rows,
                       const Tensor& recv, const std::vector<int64_t>& recv_rows) const;
    // Starts the all_to_all_v of `send`'s rows through host buffers (the received rows are
    // uploaded by finish_exchange, all or all but this rank's own block).
    int64_t start_exchange(Device& dev, const Tensor& send, const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows);
    void finish_exchange(Device& dev, int64_t id, const Tensor& recv, const LayerRows& d,
                         bool skip_own);
    // The experts' block of source s (rows from s for every local expert) and its backward.
    ExpertBlock block(const LayerRows& d, int64_t s) const;
    ExpertGradBlock grad_block(const LayerRows& d, int64_t s, const GradScratch& g) const;

    void forward_overlapped(Device& dev, LayerRows& d, const MoeActs& a, const Experts& experts);
    void backward_overlapped(Device& dev, LayerRows& d, const GradScratch& g,
                             const ExpertsBackward& experts,
                             const std::function<void()>& meanwhile);

    const ModelConfig& c_;
    Communicator& group_;
    int64_t n_local_;
    bool overlap_;
    DType xg_ = DType::f32;
    std::vector<LayerRows> layers_;
    GradRows grads_;                              // shared by the layers: one backward at a time
    std::vector<unsigned char> send_h_, recv_h_;  // host staging of the overlapped exchanges
};

}  // namespace moetrain
