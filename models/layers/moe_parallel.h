// What an MoE layer (moe.cpp) needs from the parallel context, as two interfaces the layer owns
// and the context implements: the layer never sees a rank or a communicator.
// - TokenDispatcher: between the gather of the routed rows (sorted by expert) and the combine,
//   brings each row to the rank holding its expert, lets the layer run the grouped expert FFN
//   over the rows that arrived, and brings the outputs back in the order the combine reads; the
//   backward moves the gradients the same ways. Implementations: models/dispatch/ (local: every
//   expert here; all-to-all: expert parallel).
// - RoutingStats: the routing statistics over the micro-batch a pass belongs to, which under
//   data parallelism is every rank's rows (MODEL.md 2, docs/DISTRIBUTED.md): the capacity
//   admission order and the selections per expert (f_e). Implementation:
//   models/parallel/routing_stats.cpp.
#pragma once

#include <cstdint>
#include <functional>

#include "layers/layer_acts.h"

namespace moetrain {

// Rows that this rank's experts run over: `rows` rows of x, sorted by local expert (local
// expert g owns counts[g] consecutive rows, an i32 device tensor of `groups` entries), the
// experts' activations over them and their outputs y (written by the experts).
struct ExpertBlock {
    int64_t rows = 0;
    Tensor counts;
    int64_t groups = 0;
    Tensor x, y;
    FfnActs acts;
};
// The backward of one block: dy = d loss / d y in; the experts write dx = d loss / d x, with
// `scratch` holding the hidden gradients of these rows.
struct ExpertGradBlock {
    ExpertBlock block;
    Tensor dy, dx;
    GradScratch scratch;
};

class TokenDispatcher {
  public:
    virtual ~TokenDispatcher() = default;
    TokenDispatcher() = default;
    TokenDispatcher(const TokenDispatcher&) = delete;
    TokenDispatcher& operator=(const TokenDispatcher&) = delete;

    using Experts = std::function<void(const ExpertBlock&)>;
    using ExpertsBackward = std::function<void(const ExpertGradBlock&)>;

    // "local", "all-to-all" or "overlapped all-to-all" (docs, errors).
    virtual const char* name() const = 0;
    // The experts whose weights this rank holds (the G of the expert weight views).
    virtual int64_t local_experts() const = 0;
    // A new batch shape: N tokens per rank, routed rows stored in `xg` (MoeActs::xg), over
    // `moe_layers` MoE layers. Buffers sized for the previous shape are released.
    virtual void plan(Device& dev, int64_t N, DType xg, int moe_layers) = 0;
    // Forward of MoE layer `moe_layer` (its index among the MoE layers): a.xg's `rows` rows,
    // sorted by expert (a.counts [E]), reach their experts; `experts` runs once per block this
    // rank's experts own; the outputs arrive in a.yrows, row for row of a.xg.
    virtual void forward(Device& dev, int moe_layer, const MoeActs& a, int64_t rows,
                         const Experts& experts) = 0;
    // Backward of the same layer after its forward: g.drows (d loss / d a.yrows) reach the
    // experts' ranks, `experts` runs the backward of every block, and g.dxg (d loss / d a.xg)
    // arrives row for row. `meanwhile` is work of the layer that reads and writes none of
    // those (the shared experts' backward): it runs once, before the experts' backward, while
    // the rows travel where the dispatcher overlaps.
    virtual void backward(Device& dev, int moe_layer, const MoeActs& a, const GradScratch& g,
                          int64_t rows, const ExpertsBackward& experts,
                          const std::function<void()>& meanwhile) = 0;
};

class RoutingStats {
  public:
    virtual ~RoutingStats() = default;
    RoutingStats() = default;
    RoutingStats(const RoutingStats&) = delete;
    RoutingStats& operator=(const RoutingStats&) = delete;

    // The ranks whose rows make up the micro-batch (1: this rank's rows are all of it).
    virtual int64_t ranks() const = 0;
    // The share of the micro-batch's aux / z means that this rank's local loss terms carry:
    // with R ranks of equal N, the local ops (normalised by the local N and counts) scale aux
    // by 1/R^2 and z by 1/R (exactly 1 in one process).
    float aux_share() const { return 1.0f / static_cast<float>(ranks() * ranks()); }
    float z_share() const { return 1.0f / static_cast<float>(ranks()); }
    // Capacity admission in slot-then-token priority over the micro-batch (every rank's rows in
    // rank order): the selections of earlier ranks admitted before this rank's, per slot and
    // expert, as Device::moe_capacity reads them. With one rank: none (an empty tensor). Else
    // `offsets` ([k, E] i32, the layer's), computed from every rank's top-k choices when
    // `exchange` (the forward; a collective), reused as they are otherwise (the recompute).
    virtual Tensor admission_offsets(Device& dev, const Tensor& topk_idx, const Tensor& offsets,
                                     int64_t N, int64_t k, int64_t E, bool exchange) = 0;
    // The selections per expert over the micro-batch (f_e of the aux loss, the bias update and
    // the loads) from this rank's `local` ([E] i32): `local` itself with one rank; else
    // `global`, summed over the ranks into it when `exchange` (the forward; a collective) and
    // read as it is otherwise (the backward).
    virtual Tensor micro_batch_counts(Device& dev, const Tensor& local, const Tensor& global,
                                      bool exchange) = 0;
};

}  // namespace moetrain
