// The routed-expert part of an MoE layer (moe.cpp calls it between the gather and the
// combine): the grouped FFN of the experts over the rows sorted by expert, forward and
// backward. In one process (or plain data parallelism) every expert is here and it is one
// grouped FFN. Under expert parallelism (docs/DISTRIBUTED.md) the E experts are split over the
// P ranks of an expert-parallel group, rank j holding experts [j E/P, (j + 1) E/P): the rows
// routed to another rank's experts go there with an all-to-all-v, the owner runs its experts
// over the rows it received, and the outputs come back for the combine; the backward sends
// the output-row gradients the same way and returns the input-row gradients.
#pragma once

#include <memory>
#include <vector>

#include "model/param_layout.h"
#include "model/workspace.h"
#include "moetrain/comm.h"

namespace moetrain {

// Backward scratch shared by the MoE layers: the gradients of the received rows.
struct MoeDispatchScratch {
    int64_t rows = 0;       // capacity
    Tensor dyr, dxr;        // received output-row / returned input-row gradients [rows, D]
    Tensor dh, dgate, dup;  // the experts' hidden gradients [rows, F]
};

// The expert-parallel state of one MoE layer. The rows this rank receives arrive in blocks by
// source rank, each sorted by local expert. Their number depends on the routing: N k per
// rank when the router is balanced, at most P N min(k, E/P) (every token of the group routed
// here); the buffers start at the balanced size and grow (outside any recorded step: these
// passes run eagerly) when a micro-batch needs more.
struct MoeDispatch {
    Communicator* group = nullptr;  // the expert-parallel group (P ranks)
    int64_t n_local = 0;            // experts on this rank: [rank * n_local, (rank + 1) n_local)
    DType xg_dtype = DType::f32;    // of the rows sent (MoeActs::xg)
    int64_t rows = 0;               // capacity of xr, yr, acts
    Tensor xr;                      // received input rows [rows, D]
    Tensor yr;                      // this rank's expert outputs over them [rows, D] f32
    FfnActs acts;                   // the experts' activations over them [rows, F] f32
    Tensor counts;                  // i32 [P, n_local]: rows from source s for local expert e
    std::vector<int64_t> send_rows, recv_rows;  // per rank of the group, from the last forward
    std::shared_ptr<MoeDispatchScratch> scratch;
};

// The dispatch state of `layers` MoE layers for N tokens per rank (buffers of N k rows).
std::vector<MoeDispatch> plan_moe_dispatch(Device& dev, const ModelConfig& c, Communicator* group,
                                           int64_t N, DType xg_dtype, int layers);
// Device bytes of plan_moe_dispatch for `layers` layers and `rows` received rows per layer.
int64_t moe_dispatch_bytes(const ModelConfig& c, int64_t group_size, int64_t rows, DType xg_dtype,
                           int layers);
// The rows a rank receives per MoE layer: balanced routing (N k) and at most.
int64_t moe_dispatch_rows_balanced(const ModelConfig& c, int64_t N);
int64_t moe_dispatch_rows_max(const ModelConfig& c, int64_t group_size, int64_t N);

// yrows = the routed experts' outputs over a.xg's `rows` rows (sorted by expert, a.counts).
// `w` holds every expert, or with `ep` this rank's n_local experts.
void moe_experts_fwd(Device& dev, const ModelConfig& c, const FfnW& w, const MoeActs& a,
                     int64_t rows, MoeDispatch* ep);
// From g.drows (d loss / d expert outputs): the expert weight gradients (added into gw) and
// g.dxg (d loss / d expert input rows).
void moe_experts_bwd(Device& dev, const ModelConfig& c, const FfnW& w, const FfnW& gw,
                     const MoeActs& a, const GradScratch& g, int64_t rows, MoeDispatch* ep);

}  // namespace moetrain
