// `moetrain plan`: the device memory one training configuration needs, part by part (weights,
// master weights, gradients, optimizer state, activations, workspace; plan_training_memory),
// and whether it fits the chosen device (--device, read from the registry without opening
// it) or a given capacity (--memory-gb, for hardware this machine does not have).
#include <cstdio>
#include <string>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "number_options.h"
#include "moetrain/memory_plan.h"
#include "plan_collectives.h"

namespace moetrain::cli {
namespace {

struct PlanArgs {
    ModelChoice model;
    std::string device = "cpu", precision = "fp32", optimizer = "adamw", recompute = "none";
    int batch = 0, seq = 0;
    double memory_gb = 0;
    int ranks = 1, zero = 0, accum = 1;  // data parallel (docs/DISTRIBUTED.md)
    int expert_parallel = 1;
    bool attention16 = false;
};

// Memory of `spec` ("cpu", "cuda:1"...) as the registry lists it; throws naming why not.
double device_memory_bytes(const std::string& spec) {
    DeviceInfo d;
    try {
        d = device_info(spec);
    } catch (const Error& e) {
        fail(e.what(), "; give its capacity with --memory-gb instead");
    }
    MT_CHECK(d.memory_bytes > 0, "--device ", spec,
             ": its memory size is unknown; give it with --memory-gb");
    return static_cast<double>(d.memory_bytes);
}

void run_plan(const PlanArgs& a) {
    const ModelConfig cfg = a.model.resolve();
    PlanOptions o;
    o.batch = a.batch;
    o.seq = a.seq;
    o.precision = parse_precision(a.precision);
    o.optimizer = parse_optimizer(a.optimizer);
    o.recompute = parse_recompute(a.recompute);
    o.attention16 = a.attention16;
    o.ranks = a.ranks;
    o.zero = a.zero;
    o.expert_parallel = a.expert_parallel;
    const MemoryPlan p = plan_training_memory(cfg, o);
    const double capacity = a.memory_gb > 0 ? a.memory_gb * 1e9 : device_memory_bytes(a.device);
    char given[64];
    std::snprintf(given, sizeof given, "a %g GB device", a.memory_gb);
    const std::string where = a.memory_gb > 0 ? given : a.device;

    const ModelCost cost = model_cost(cfg);
    if (a.ranks > 1)
        std::printf(
            "per rank of %d (data parallel, global batch %d%s%s):\n", a.ranks, a.batch * a.ranks,
            a.zero ? ", ZeRO-1" : "",
            a.expert_parallel > 1
                ? (", expert parallel " + std::to_string(a.expert_parallel) + ": " +
                   std::to_string(cfg.moe->n_experts / a.expert_parallel) + " experts per rank")
                      .c_str()
                : "");
    std::printf("plan: %s, %.1fM params, B=%d T=%d, %s, %s, recompute %s\n",
                a.model.preset.empty() ? a.model.config_path.c_str() : a.model.preset.c_str(),
                cost.total_params / 1e6, a.batch, a.seq, a.precision.c_str(), a.optimizer.c_str(),
                a.recompute.c_str());
    auto row = [&](const char* part, double bytes, const char* what) {
        std::printf("  %-15s %10.2f GB  %s\n", part, bytes / 1e9, what);
    };
    row("weights", p.weights,
        o.precision == Precision::fp32 ? "fp32 parameters" : "16-bit copy of the weight matrices");
    row("master weights", p.master_weights,
        o.precision == Precision::fp32 ? "(fp32: the weights are the master)" : "fp32 parameters");
    row("grads", p.grads, "fp32");
    row("optimizer", p.optimizer,
        o.optimizer == OptimizerKind::adamw       ? "AdamW m, v in fp32"
        : o.optimizer == OptimizerKind::adamw8bit ? "AdamW m, v in 8 bits + a scale per 256"
                                                  : "SGD: none");
    if (a.zero)
        row("zero shards", p.zero_buffers,
            a.expert_parallel > 1 ? "ZeRO-1: the staged piece of a segment"
                                  : "ZeRO-1: reduced gradient and updated parameter shard");
    if (a.expert_parallel > 1) {
        char why[160];
        std::snprintf(why, sizeof why,
                      "rows received from the group, their activations and gradients "
                      "(balanced router; up to %.2f GB)",
                      p.expert_dispatch_max / 1e9);
        row("expert rows", p.expert_dispatch, why);
        const std::string covers =
            a.zero ? "1/" + std::to_string(a.ranks) + " of the non-expert weights and 1/" +
                         std::to_string(a.ranks / a.expert_parallel) + " of its own experts"
                   : std::string("its own experts only");
        std::printf(
            "  (expert parallel: the weights and gradients are the non-expert ones and this "
            "rank's experts; the optimizer state covers %s)\n",
            covers.c_str());
    }
    row("activations", p.activations, "kept for the backward pass");
    row("workspace", p.workspace, "backward scratch, logits chunk, batch, backend op scratch");
    row("total", p.total(), "");
    const bool fits = p.total() <= capacity;
    std::printf("%s: %.2f GB -> %s (%.0f%% of it)\n", where.c_str(), capacity / 1e9,
                fits ? "fits" : "does NOT fit", 100.0 * p.total() / capacity);
    std::printf(
        "(moetrain's own buffers; the runtime's overhead, e.g. a CUDA context, comes on "
        "top)\n");
    nlohmann::json j{{"weights", p.weights},
                     {"master_weights", p.master_weights},
                     {"grads", p.grads},
                     {"optimizer", p.optimizer},
                     {"activations", p.activations},
                     {"workspace", p.workspace},
                     {"total", p.total()},
                     {"capacity", capacity},
                     {"fits", fits}};
    if (a.ranks > 1) {
        j["ranks"] = a.ranks;
        j["zero"] = a.zero;
        j["zero_buffers"] = p.zero_buffers;
        j["expert_parallel"] = a.expert_parallel;
        j["expert_dispatch"] = p.expert_dispatch;
        j["expert_dispatch_max"] = p.expert_dispatch_max;
        PlannedExpertParallel ep;
        ep.ranks = a.expert_parallel;
        ep.tokens = int64_t{a.batch} * a.seq;
        ep.xg_bytes = o.precision == Precision::fp32 ? 4 : 2;
        ep.recompute = o.recompute != Recompute::none;
        j["collectives"] =
            print_collectives(plan_collectives(cfg, cost.total_params, a.ranks, a.zero, a.accum,
                                               DistOptions{}.bucket_elems, ep),
                              a.ranks);
    }
    std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
    auto a = std::make_shared<PlanArgs>();
    auto* cmd = app.add_subcommand(
        "plan", "device memory a training configuration needs, by part, and whether it fits");
    a->model.add_options(cmd);
    cmd->add_option("--device", a->device, "cpu | opencl[:N] | cuda[:N]: capacity from `info`")
        ->capture_default_str();
    add_real_option(cmd, "--memory-gb", a->memory_gb, "plan for a device of this many GB instead",
                    positive_real(1e6));
    add_int_option(cmd, "--batch", a->batch, "batch size B", 1)->required();
    add_int_option(cmd, "--seq", a->seq, "sequence length T", 1)->required();
    add_precision_option(cmd, a->precision);
    add_defaulted(cmd, "--optimizer", a->optimizer, "adamw | adamw8bit | sgd",
                  CLI::IsMember({"adamw", "adamw8bit", "sgd"}));
    add_defaulted(cmd, "--recompute", a->recompute, "none | block | ffn",
                  CLI::IsMember({"none", "block", "ffn"}));
    add_int_option(cmd, "--ranks", a->ranks,
                   "data-parallel ranks (mpirun -np N); --batch is per rank", 1)
        ->capture_default_str();
    add_int_option(cmd, "--zero", a->zero,
                   "1 = ZeRO-1: the (8-bit) AdamW moments sharded over the ranks (with "
                   "--expert-parallel, AdamW: an expert's over the ranks holding it)",
                   0, 1)
        ->capture_default_str();
    add_int_option(cmd, "--expert-parallel", a->expert_parallel,
                   "E: groups of E ranks split the experts (per-rank memory and the all-to-all-v "
                   "of the routed rows; adamw8bit: without --zero)",
                   1)
        ->capture_default_str();
    add_int_option(cmd, "--accum", a->accum, "micro-batches per step (collective counts)", 1)
        ->capture_default_str();
    add_attention16_option(cmd, a->attention16);
    on_run(cmd, exit_code, [a] { run_plan(*a); });
}

}  // namespace moetrain::cli
