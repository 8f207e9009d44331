// plan_collectives: see plan_collectives.h. The step's collectives, as the Trainer and the
// model run them (models/train/sync/, models/layers/moe.cpp):
//  - every micro-batch: the target count (1 x i32) and, per MoE layer, the expert counts
//    (E x i32) all-reduced; with a capacity also the admission offsets' shares (R x k x E i32)
//    reduce-scattered and the admitted counts (E x i32) all-reduced;
//  - every step: the loss terms (3 x f32) all-reduced; then either the gradients all-reduced
//    in buckets, or (ZeRO-1) reduce-scattered, their shards' squared norm all-reduced and the
//    updated parameter shards all-gathered.
//  - expert parallel over groups of P: per MoE layer and micro-batch, the group all-gathers
//    the expert counts (P x E i32) and four all-to-all-v move the routed rows (input rows to
//    the owners, outputs back, output gradients to the owners, input gradients back; the
//    forward's two again when the backward recomputes it); the bytes assume a balanced router
//    (N k rows per rank, (P - 1) / P of them to other ranks). The gradients of the non-expert
//    weights are all-reduced over all ranks, those of a rank's experts (1/P of the expert
//    weights) over the N / P ranks holding them, and the experts' squared norm over the group;
//    with ZeRO-1 each segment of both parts is reduce-scattered instead (the non-expert
//    segments, one before each MoE layer's expert tensors and one after the last, over all
//    ranks; the rank's expert blocks, one per expert tensor, over the N / P), the pieces'
//    squared norm all-reduced and the updated pieces all-gathered the same ways.
// Ring algorithms: an all-reduce sends 2 (N - 1) / N of its message per rank, a
// reduce-scatter or all-gather (N - 1) / N of the whole buffer.
#include "plan_collectives.h"

#include <cstdio>

namespace moetrain::cli {

std::vector<PlannedCollective> plan_collectives(const ModelConfig& c, int64_t n_params, int ranks,
                                                int zero, int accum, int64_t bucket_elems,
                                                const PlannedExpertParallel& ep) {
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
    if (moe_layers > 0 && c.moe->capacity_factor > 0) {
        // The admission offsets: every rank's shares (R x k x E i32) reduce-scattered, and the
        // admitted rows per expert all-reduced for the logged drop share.
        const double kE = static_cast<double>(c.moe->active_k() * c.moe->n_experts);
        add("reduce_scatter capacity offsets", int64_t{accum} * moe_layers, 4 * R * kE, ring);
        add("all_reduce admitted counts", int64_t{accum} * moe_layers,
            4.0 * static_cast<double>(c.moe->n_experts), 2 * ring);
    }
    add("all_reduce loss terms", 1, 12, 2 * ring);
    if (ep.ranks > 1 && moe_layers > 0) {
        const double P = ep.ranks, Rr = R / P, E = c.moe->n_experts, D = c.d_model;
        const double a2a = (P - 1) / P, rows = static_cast<double>(ep.tokens) * c.moe->active_k();
        const int64_t passes = int64_t{accum} * moe_layers;
        add("all_gather expert counts", passes * (ep.recompute ? 2 : 1), 4 * P * E, a2a);
        const double f32_rows = rows * D * 4;
        add("all_to_all_v rows to experts", passes * (ep.recompute ? 2 : 1), rows * D * ep.xg_bytes,
            a2a);
        add("all_to_all_v expert outputs", passes * (ep.recompute ? 2 : 1), f32_rows, a2a);
        add("all_to_all_v output grads", passes, f32_rows, a2a);
        add("all_to_all_v input grads", passes, f32_rows, a2a);
        const double hidden = c.ffn == FfnKind::swiglu ? 3 : 2;
        const double experts = moe_layers * E * hidden * c.d_ff * D;  // elements
        const double shared = static_cast<double>(n_params) - experts;
        const double mine = experts / P, replicas = (Rr - 1) / Rr;
        if (zero == 1) {
            const int64_t ss = moe_layers + 1, es = moe_layers * static_cast<int64_t>(hidden);
            const double sm = 4 * shared / static_cast<double>(ss);
            const double em = 4 * mine / static_cast<double>(es);
            add("reduce_scatter shared grads", ss, sm, ring);
            if (Rr > 1) add("reduce_scatter expert grads", es, em, replicas);
            add("all_reduce grad norm", 1, 4, 2 * ring);
            add("all_gather shared params", ss, sm, ring);
            if (Rr > 1) add("all_gather expert params", es, em, replicas);
            return out;
        }
        const int64_t sb = static_cast<int64_t>((shared + bucket_elems - 1) / bucket_elems);
        add("all_reduce shared grads", sb, 4 * shared / static_cast<double>(sb), 2 * ring);
        if (Rr > 1) {
            const int64_t eb = static_cast<int64_t>((mine + bucket_elems - 1) / bucket_elems);
            add("all_reduce expert grads", eb, 4 * mine / static_cast<double>(eb), 2 * replicas);
        }
        add("all_reduce expert norm", 1, 4, 2 * a2a);
        return out;
    }
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
