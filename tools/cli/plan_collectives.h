// The collectives one data-parallel training step runs (docs/DISTRIBUTED.md), for
// `moetrain plan --ranks N`: each one's message size and the bytes a rank sends for it under
// the usual ring / pairwise algorithms (what nccl-tests call bus bytes).
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

// n_params: elements of the flat parameter buffer.
std::vector<PlannedCollective> plan_collectives(const ModelConfig& c, int64_t n_params, int ranks,
                                                int zero, int accum, int64_t bucket_elems);

// Prints the table and returns it as JSON.
nlohmann::json print_collectives(const std::vector<PlannedCollective>& cs, int ranks);

}  // namespace moetrain::cli
