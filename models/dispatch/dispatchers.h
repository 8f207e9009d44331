// The token dispatchers of the MoE layers (the TokenDispatcher interface of
// models/layers/moe_parallel.h), one file each:
// - local (local_dispatcher.cpp): every expert is on this rank (one process, or data parallel
//   without expert parallelism); the sorted rows are the one block the experts run over;
// - all-to-all (all_to_all_dispatcher.h): expert parallel, rank j of P holding experts
//   [j E/P, (j + 1) E/P); the rows travel with an all-to-all-v and come back the same way,
//   blocking, or overlapped with the experts' work on the rows that stay on this rank
//   (all_to_all_overlap.cpp; the same bits).
// A third (an overlapped or hierarchical exchange) is another file here and a case of
// make_token_dispatcher; nothing outside this folder changes.
#pragma once

#include <cstdint>
#include <memory>

#include "layers/moe_parallel.h"

namespace moetrain {

class Communicator;

// The dispatcher for `expert_group` (nullptr: every expert here; else expert parallel over its
// P ranks, P dividing E), overlapping its exchanges when `overlap`.
std::unique_ptr<TokenDispatcher> make_token_dispatcher(const ModelConfig& c,
                                                       Communicator* expert_group, bool overlap);

std::unique_ptr<TokenDispatcher> make_local_dispatcher(const ModelConfig& c);
std::unique_ptr<TokenDispatcher> make_all_to_all_dispatcher(const ModelConfig& c,
                                                            Communicator& group, bool overlap);

// The memory of the all-to-all dispatcher, for the memory planner
// (backends/planning/memory_plan.cpp): device bytes of its buffers for `layers` MoE layers
// and `rows` received rows per layer over a group of `group_size` ranks.
int64_t moe_dispatch_bytes(const ModelConfig& c, int64_t group_size, int64_t rows, DType xg_dtype,
                           int layers);
// The rows a rank receives per MoE layer for N tokens per rank: balanced routing (N k, the
// size the buffers start at) and at most (every token of the group routed here).
int64_t moe_dispatch_rows_balanced(const ModelConfig& c, int64_t N);
int64_t moe_dispatch_rows_max(const ModelConfig& c, int64_t group_size, int64_t N);

}  // namespace moetrain
