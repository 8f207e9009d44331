// The routing statistics of the MoE layers (the RoutingStats interface of
// models/layers/moe_parallel.h): over this rank's rows, or over every rank's rows of a
// data-parallel micro-batch (docs/DISTRIBUTED.md).
#pragma once

#include <memory>

#include "layers/moe_parallel.h"

namespace moetrain {

class Communicator;

// One process (or a pass that stays local: evaluation, generation): no exchange.
std::unique_ptr<RoutingStats> make_local_routing_stats();
// Data parallel over `ranks`: the capacity admission offsets come from one reduce-scatter of
// every rank's per-slot shares, the counts from one all-reduce.
std::unique_ptr<RoutingStats> make_ranks_routing_stats(Communicator& ranks);

}  // namespace moetrain
