// The collectives one data-parallel training step runs (docs/DISTRIBUTED.md), for
// `moetrain plan --ranks N [--expert-parallel E]`: each one's message size and the bytes a
// rank sends for it under the usual ring / pairwise algorithms (what nccl-tests call bus
// bytes).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "moetrain/config.h"

namespace moetrain::cli {

struct PlannedCollective {
    std::string name;          // "all_reduce gradients", ...
    int64_t calls = 0;         // per optimizer step
    double message_bytes = 0;  // per call
    double sent_bytes = 0;     // per step, by one rank
};

// Expert parallel: groups of `ranks` ranks, `tokens` per rank per micro-batch, expert input
// rows of `xg_bytes` per element (4, or 2 when 16-bit), the MoE forward run twice when the
// backward recomputes it.
struct PlannedExpertParallel {
    int ranks = 1;
    int64_t tokens = 0;
    int xg_bytes = 4;
    bool recompute = false;
};

// n_params: elements of the flat parameter buffer.
std::vector<PlannedCollective> plan_collectives(const ModelConfig& c, int64_t n_params, int ranks,
                                                int zero, int accum, int64_t bucket_elems,
                                                const PlannedExpertParallel& ep = {});

// Prints the table and returns it as JSON.
nlohmann::json print_collectives(const std::vector<PlannedCollective>& cs, int ranks);

}  // namespace moetrain::cli
