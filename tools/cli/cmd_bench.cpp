// `moetrain bench`: time training steps on random tokens; last stdout line is JSON with
// tokens_per_s, ms_per_step (median), gflops (model FLOPs, docs/MODEL_NOTES.md), mfu,
// peak_rss_mb, and the analytic memory need next to it (analytic_mb, rss_ratio).
// `--recompute none|block|ffn` trains with gradient checkpointing; the activation memory of
// that plan (analytic, and the device bytes of the planned training workspace) is printed
// next to that of `none` (activation_mb, workspace_mb in the JSON).
// `--generate N` instead times batch-B KV-cache decoding of N tokens after a T-token prompt
// (median time per decode step) against the memory-bandwidth bound (weight bytes per token /
// the device's bandwidth); the JSON keeps the same keys (tokens_per_s = decode tokens/s;
// graph_replayed_steps = timed decode steps replayed from a CUDA graph).
// The peak (MFU) and the bandwidth (decode bound) are the device's own unless given with
// --peak-gflops / --bandwidth-gbs: NVIDIA's figure for a known GPU, the runtime's bandwidth, or
// a short probe (device_peak.h); the output says which (peak_source, bandwidth_source).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "bench_memory.h"
#include "commands.h"
#include "common.h"
#include "device_peak.h"
#include "number_options.h"
#include "moetrain/generate.h"
#include "moetrain/model.h"
#include "moetrain/profiling.h"
#include "moetrain/memory_plan.h"
#include "moetrain/stop.h"
#include "moetrain/train.h"

namespace moetrain::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
    ModelChoice model;
    DeviceChoice dev;
    int batch = 0, seq = 0, steps = 10, warmup = 2, generate = 0;
    double peak_gflops = 0, bandwidth_gbs = 0;  // 0: the device's (device_peak.h)
    uint64_t seed = 1337;
    bool profile = false, profile_shapes = false;
    std::string recompute = "none";
    std::string precision = "fp32";
    bool attention16 = false;
    std::string optimizer = "adamw";
};

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int vocab, int64_t n) {
    std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = tok(rng);
    return v;
}

// Per-op table: share of step time, calls, time per step, achieved GFLOP/s and GB/s.
void print_profile(const ProfilingDevice& prof, int steps) {
    auto table = prof.table();
    double total = 0;
    int width = 16;  // the op column: as wide as the longest name (by-shape rows are long)
    for (const auto& p : table) {
        total += p.seconds;
        width = std::max(width, static_cast<int>(p.op.size()));
    }
    std::printf("%-*s %6s %8s %10s %9s %8s\n", width, "op", "share", "calls", "ms/step", "GFLOP/s",
                "GB/s");
    for (const auto& p : table) {
        std::printf("%-*s %5.1f%% %8lld %10.2f %9.1f %8.1f\n", width, p.op.c_str(),
                    100.0 * p.seconds / total, static_cast<long long>(p.calls / steps),
                    1000.0 * p.seconds / steps, p.seconds > 0 ? p.flops / p.seconds / 1e9 : 0.0,
                    p.seconds > 0 ? p.bytes / p.seconds / 1e9 : 0.0);
    }
    std::printf(
        "(ops timed one by one with a device sync after each; step times above include "
        "that overhead)\n");
}

void print_memory(const MemoryNeed& m, double rss_mb) {
    const double mb = 1024.0 * 1024.0;
    std::printf(
        "memory: analytic %.0f MB (weights %.0f, grads %.0f, AdamW moments %.0f, saved "
        "activations %.0f), peak RSS %.0f MB = %.2fx analytic\n",
        m.total() / mb, m.weights / mb, m.grads / mb, m.moments / mb, m.activations / mb, rss_mb,
        rss_mb / (m.total() / mb));
}

// The activations a training step keeps in this recompute mode against keeping all of them.
void print_activations(Recompute mode, const MemoryNeed& m, const MemoryNeed& all,
                       double workspace_bytes) {
    const double mb = 1024.0 * 1024.0;
    std::printf(
        "activations: recompute %s keeps %.1f MB (none: %.1f MB, %.2fx); planned "
        "training workspace %.1f MB (activations + backward scratch)\n",
        to_string(mode).c_str(), m.activations / mb, all.activations / mb,
        m.activations / all.activations, workspace_bytes / mb);
}

// "peak 989400 GFLOP/s bf16 (table: NVIDIA H200, dense tensor cores)"
void print_peak(const char* what, const PeakFigure& p, const char* unit, const std::string& tag) {
    std::printf("%s %.0f %s%s (%s)\n", what, p.value, unit, tag.c_str(), p.source.c_str());
}

void run_train_bench(const BenchArgs& a, const ModelConfig& cfg, Device& device,
                     ProfilingDevice* profiler, const PeakFigure& peak) {
    const Recompute mode = parse_recompute(a.recompute);
    Model model(device, cfg);
    model.set_precision(parse_precision(a.precision));
    model.set_attention16(a.attention16);
    model.init_weights(a.seed);
    model.set_recompute(mode);
    TrainOptions opts;
    opts.optimizer = parse_optimizer(a.optimizer);
    opts.total_steps = a.warmup + a.steps;
    Trainer trainer(model, opts);

    const int64_t n = static_cast<int64_t>(a.batch) * a.seq;
    std::mt19937 rng(static_cast<uint32_t>(a.seed));
    const std::vector<int32_t> x = random_tokens(rng, cfg.vocab_size, n);
    const std::vector<int32_t> y = random_tokens(rng, cfg.vocab_size, n);

    ModelCost cost = model_cost(cfg);
    std::printf("bench: %s on %s, %s, %.1fM params (%.1fM active matmul/token), B=%d T=%d\n",
                a.model.preset.empty() ? a.model.config_path.c_str() : a.model.preset.c_str(),
                device.name().c_str(), a.precision.c_str(), cost.total_params / 1e6,
                cost.active_matmul_params / 1e6, a.batch, a.seq);
    std::vector<double> ms;
    int replayed = 0;      // timed steps that were CUDA graph replays
    stop_cooperatively();  // a stop ends the bench before its next step
    for (int i = 0; i < a.warmup + a.steps; ++i) {
        check_stop("bench before step " + std::to_string(i + 1) + "; no result was printed");
        if (profiler && i == a.warmup) profiler->reset();
        const auto t0 = Clock::now();
        StepStats st = trainer.step(x.data(), y.data(), a.batch, a.seq);
        device.synchronize();
        const double dt = ms_since(t0);
        const bool timed = i >= a.warmup;
        if (timed) ms.push_back(dt);
        const char* graph = st.run == StepRun::captured   ? ", captured into a CUDA graph"
                            : st.run == StepRun::replayed ? ", CUDA graph replay"
                                                          : "";
        std::printf("  step %d%s: %.1f ms, loss %.4f%s%s\n", i + 1, timed ? "" : " (warm-up)", dt,
                    st.loss.loss, st.skipped ? " (fp16 overflow: skipped)" : "", graph);
        if (timed) replayed += st.run == StepRun::replayed;
    }
    const double med = median(ms);
    const double tps = n / (med / 1000.0);
    const double gflops = cost.train_flops_per_token(a.seq) * tps / 1e9;
    if (profiler) print_profile(*profiler, a.steps);
    const MemoryNeed mem = training_memory(cfg, cost.total_params, a.batch, a.seq, mode);
    const MemoryNeed all = training_memory(cfg, cost.total_params, a.batch, a.seq);
    const double ws_bytes = static_cast<double>(model.training_workspace_bytes(a.batch, a.seq));
    const double rss = peak_rss_mb();
    print_activations(mode, mem, all, ws_bytes);
    print_memory(mem, rss);
    PlanOptions po;
    po.batch = a.batch;
    po.seq = a.seq;
    po.precision = model.precision();
    po.optimizer = opts.optimizer;
    po.recompute = mode;
    po.attention16 = a.attention16;
    const MemoryPlan plan = plan_training_memory(cfg, po);
    const double mb = 1024.0 * 1024.0;
    std::printf(
        "plan (moetrain plan): %.0f MB (weights %.0f, master %.0f, grads %.0f, optimizer "
        "%.0f, activations %.0f, workspace %.0f); peak RSS = %.2fx plan\n",
        plan.total() / mb, plan.weights / mb, plan.master_weights / mb, plan.grads / mb,
        plan.optimizer / mb, plan.activations / mb, plan.workspace / mb, rss / (plan.total() / mb));
    nlohmann::json j;
    j["precision"] = a.precision;
    j["attention16"] = a.attention16;
    j["optimizer"] = a.optimizer;
    j["graph_replayed_steps"] = replayed;
    j["tokens_per_s"] = tps;
    j["ms_per_step"] = med;
    j["gflops"] = gflops;
    j["mfu"] = gflops / peak.value;
    j["peak_gflops"] = peak.value;
    j["peak_source"] = peak.source;
    j["peak_rss_mb"] = rss;
    j["analytic_mb"] = mem.total() / mb;
    j["rss_ratio"] = rss / j["analytic_mb"].get<double>();
    j["plan_mb"] = plan.total() / mb;
    j["recompute"] = to_string(mode);
    j["activation_mb"] = mem.activations / mb;
    j["workspace_mb"] = ws_bytes / mb;
    std::printf(
        "median %.1f ms/step, %.0f tokens/s, %.1f GFLOP/s, MFU %.1f%% of %.0f GFLOP/s (%s)\n", med,
        tps, gflops, 100.0 * gflops / peak.value, peak.value, peak.source.c_str());
    std::printf("%s\n", j.dump().c_str());
}

// Decoding: B prompts of T random tokens, then a.generate greedy tokens with the KV cache;
// the time of each decode step is the gap between consecutive token callbacks.
void run_generate_bench(const BenchArgs& a, const ModelConfig& cfg, Device& device,
                        ProfilingDevice* profiler, const PeakFigure& peak,
                        const PeakFigure& bandwidth) {
    MT_CHECK(a.generate >= 2, "--generate needs at least 2 tokens (got ", a.generate, ")");
    MT_CHECK(a.seq + a.generate <= cfg.max_seq_len, "--seq ", a.seq, " + --generate ", a.generate,
             " exceeds the model's max_seq_len ", cfg.max_seq_len);
    Model model(device, cfg);
    model.set_precision(parse_precision(a.precision));
    model.set_attention16(a.attention16);
    model.init_weights(a.seed);
    std::mt19937 rng(static_cast<uint32_t>(a.seed));
    std::vector<std::vector<int32_t>> prompts;
    prompts.reserve(static_cast<size_t>(a.batch));
    for (int b = 0; b < a.batch; ++b) prompts.push_back(random_tokens(rng, cfg.vocab_size, a.seq));
    GenerateOptions g;
    g.temperature = 0.0f;  // greedy: the step is the model, not the sampler
    g.max_new_tokens = a.generate;

    const ModelCost cost = model_cost(cfg);
    const double bytes = decode_weight_bytes(cfg, cost.active_matmul_params);
    std::printf(
        "bench: %s on %s, decode B=%d after a %d-token prompt, %d tokens; %.1f MB of "
        "weights per decode step\n",
        a.model.preset.empty() ? a.model.config_path.c_str() : a.model.preset.c_str(),
        device.name().c_str(), a.batch, a.seq, a.generate, bytes / 1e6);
    std::vector<double> ms;
    int replayed = 0;      // timed decode steps that were CUDA graph replays
    stop_cooperatively();  // a stop ends the bench before its next decode step
    for (int run = 0; run < a.warmup + 1; ++run) {  // warm-up runs plan buffers and kernels
        const bool timed = run == a.warmup;
        if (profiler && timed) profiler->reset();
        auto last = Clock::now();
        generate_batch(model, prompts, g, [&](int64_t i, std::span<const int32_t>) {
            check_stop("the decode bench; no result was printed");
            if (timed && i > 0) {  // i = 0 follows the prefill
                ms.push_back(ms_since(last));
                replayed += model.last_step_run() == StepRun::replayed;
            }
            last = Clock::now();
            return true;
        });
    }
    const double med = median(ms);
    const double tps = a.batch / (med / 1000.0);
    const double bound = bandwidth.value * 1e9 / bytes;  // batch-1 tokens/s at full bandwidth
    const double gflops = 2.0 * static_cast<double>(cost.active_matmul_params) * tps / 1e9;
    if (profiler) print_profile(*profiler, a.generate - 1);
    std::printf(
        "median %.2f ms per decode step, %.1f tokens/s; bandwidth bound %.1f tokens/s "
        "(%.1f MB / %.0f GB/s, %s) -> %.1f%% of it\n",
        med, tps, bound, bytes / 1e6, bandwidth.value, bandwidth.source.c_str(),
        100.0 * tps / bound);
    nlohmann::json j;
    j["tokens_per_s"] = tps;
    j["ms_per_step"] = med;
    j["gflops"] = gflops;
    j["mfu"] = gflops / peak.value;
    j["peak_gflops"] = peak.value;
    j["peak_source"] = peak.source;
    j["bandwidth_gbs"] = bandwidth.value;
    j["bandwidth_source"] = bandwidth.source;
    j["peak_rss_mb"] = peak_rss_mb();
    j["weight_mb_per_token"] = bytes / 1e6;
    j["bandwidth_bound_tokens_per_s"] = bound;
    j["bound_fraction"] = tps / bound;
    j["graph_replayed_steps"] = replayed;
    std::printf("%s\n", j.dump().c_str());
}

void run_bench(const BenchArgs& a) {
    ModelConfig cfg = a.model.resolve();
    MT_CHECK(a.seq <= cfg.max_seq_len, "--seq ", a.seq, " exceeds the model's max_seq_len ",
             cfg.max_seq_len);
    auto opened = a.dev.open();
    std::unique_ptr<ProfilingDevice> profiler;
    if (a.profile || a.profile_shapes)
        profiler = std::make_unique<ProfilingDevice>(*opened, a.profile_shapes);
    Device& device = profiler ? *profiler : *opened;
    // The peaks are found (or probed) on the device itself, before any step is timed.
    const DeviceInfo info = device_info(a.dev.device);
    const Precision precision = parse_precision(a.precision);
    const PeakFigure peak = compute_peak(*opened, info, precision, a.peak_gflops);
    print_peak("peak", peak, "GFLOP/s", std::string(" ") + precision_name(precision));
    if (a.generate > 0) {
        const PeakFigure bandwidth = bandwidth_peak(*opened, info, a.bandwidth_gbs);
        print_peak("bandwidth", bandwidth, "GB/s", "");
        run_generate_bench(a, cfg, device, profiler.get(), peak, bandwidth);
    } else {
        run_train_bench(a, cfg, device, profiler.get(), peak);
    }
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
    const auto [a, cmd] = add_command<BenchArgs>(
        app, "bench", "time training steps (or decoding); last line is JSON");
    a->model.add_options(cmd);
    a->dev.add_options(cmd);
    add_precision_option(cmd, a->precision);
    add_attention16_option(cmd, a->attention16);
    cmd->add_option("--optimizer", a->optimizer, "adamw | adamw8bit | sgd (training steps)")
        ->capture_default_str();
    add_int_option(cmd, "--batch", a->batch, "batch size B", 1)->required();
    add_int_option(cmd, "--seq", a->seq, "sequence length T (prompt length with --generate)", 1)
        ->required();
    add_int_option(cmd, "--steps", a->steps, "timed steps", 1)->capture_default_str();
    add_int_option(cmd, "--warmup", a->warmup, "untimed steps (generate: untimed runs) first", 0)
        ->capture_default_str();
    add_real_option(cmd, "--peak-gflops", a->peak_gflops,
                    "device peak for MFU (default: the device's, from the table of known GPUs "
                    "or measured)",
                    positive_real());
    add_int_option(cmd, "--generate", a->generate,
                   "time KV-cache decoding of N tokens instead of training steps", 0);
    add_real_option(cmd, "--bandwidth-gbs", a->bandwidth_gbs,
                    "memory bandwidth for the decode bound in GB/s (default: the device's, from "
                    "the table, the runtime or measured)",
                    positive_real());
    add_int_option(cmd, "--seed", a->seed, "init and data seed", uint64_t{0})
        ->capture_default_str();
    cmd->add_flag("--profile", a->profile, "print a per-op time table (share, GFLOP/s, GB/s)");
    cmd->add_flag("--profile-shapes", a->profile_shapes,
                  "as --profile, with the matrix products split by shape, operand dtypes and "
                  "epilogue");
    cmd->add_option("--recompute", a->recompute,
                    "gradient checkpointing: none | block (keep layer inputs) | ffn (recompute "
                    "FFN / MoE internals)")
        ->capture_default_str();
    on_run(cmd, exit_code, [a] { run_bench(*a); });
}

}  // namespace moetrain::cli
