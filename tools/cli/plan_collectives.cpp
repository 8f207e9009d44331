// plan_collectives: see plan_collectives.h. The step's collectives, as the Trainer and the
// model run them (models/train/trainer_dist.cpp, models/layers/moe.cpp):
//  - every micro-batch: the target count (1 x i32) and, per MoE layer, the expert counts
//    (E x i32) all-reduced;
//  - every step: the loss terms (3 x f32) all-reduced; then either the gradients all-reduced
//    in buckets, or (ZeRO-1) reduce-scattered, their shards' squared norm all-reduced and the
//    updated parameter shards all-gathered.
// Ring algorithms: an all-reduce sends 2 (N - 1) / N of its message per rank, a
// reduce-scatter or all-gather (N - 1) / N of the whole buffer.
#include "plan_collectives.h"

#include <cstdio>

namespace moetrain::cli {

std::vector<PlannedCollective> plan_collectives(const ModelConfig& c, int64_t n_params, int ranks,
                                                int zero, int accum, int64_t bucket_elems) {
    std::vector<PlannedCollective> out;
    if (ranks <= 1) return out;
    const double R = ranks, ring = (R - 1) / R, grads = 4.0 * static_cast<double>(n_params);
    auto add = [&](const char* name, int64_t calls, double message, double per_call_factor) {
        out.push_back(
            {name, calls, message, static_cast<double>(calls) * message * per_call_factor});
    };
    add("all_reduce target count", accum, 4, 2 * ring);
    int moe_layers = 0;
    for (int l = 0; l < c.n_layers; ++l) moe_layers += c.is_moe_layer(l);
    if (moe_layers > 0)
        add("all_reduce expert counts", int64_t{accum} * moe_layers,
            4.0 * static_cast<double>(c.moe->n_experts), 2 * ring);
    add("all_reduce loss terms", 1, 12, 2 * ring);
    if (zero == 0) {
        const int64_t buckets = (n_params + bucket_elems - 1) / bucket_elems;
        add("all_reduce gradients", buckets, grads / static_cast<double>(buckets), 2 * ring);
    } else {
        add("reduce_scatter gradients", 1, grads, ring);
        add("all_reduce grad norm", 1, 4, 2 * ring);
        add("all_gather parameters", 1, grads, ring);
    }
    return out;
}

nlohmann::json print_collectives(const std::vector<PlannedCollective>& cs, int ranks) {
    nlohmann::json j = nlohmann::json::array();
    if (cs.empty()) return j;
    std::printf(
        "collectives per optimizer step over %d ranks (bytes one rank sends, ring "
        "algorithms):\n",
        ranks);
    double total = 0;
    for (const PlannedCollective& c : cs) {
        std::printf("  %-26s %6lld x %12.0f B  -> %12.3f MB sent\n", c.name.c_str(),
                    static_cast<long long>(c.calls), c.message_bytes, c.sent_bytes / 1e6);
        total += c.sent_bytes;
        j.push_back({{"collective", c.name},
                     {"calls", c.calls},
                     {"message_bytes", c.message_bytes},
                     {"sent_bytes", c.sent_bytes}});
    }
    std::printf("  %-26s %37.3f MB per rank per step\n", "total", total / 1e6);
    return j;
}

}  // namespace moetrain::cli
