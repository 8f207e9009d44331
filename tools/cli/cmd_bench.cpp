// `moetrain bench`: time training steps on random tokens; last stdout line is JSON with
// tokens_per_s, ms_per_step (median), gflops (model FLOPs, docs/MODEL_NOTES.md), mfu and
// peak_rss_mb.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "commands.h"
#include "common.h"
#include "moetrain/model.h"
#include "moetrain/profiling.h"
#include "moetrain/train.h"

namespace moetrain::cli {
namespace {

struct BenchArgs {
    ModelChoice model;
    DeviceChoice dev;
    int batch = 0, seq = 0, steps = 10, warmup = 2;
    double peak_gflops = 500.0;
    uint64_t seed = 1337;
    bool profile = false;
};

// Per-op table: share of step time, calls, time per step, achieved GFLOP/s and GB/s.
void print_profile(const ProfilingDevice& prof, int steps) {
    auto table = prof.table();
    double total = 0;
    for (const auto& p : table) total += p.seconds;
    std::printf("%-16s %6s %8s %10s %9s %8s\n", "op", "share", "calls", "ms/step", "GFLOP/s",
                "GB/s");
    for (const auto& p : table) {
        std::printf("%-16s %5.1f%% %8lld %10.2f %9.1f %8.1f\n", p.op.c_str(),
                    100.0 * p.seconds / total, static_cast<long long>(p.calls / steps),
                    1000.0 * p.seconds / steps, p.seconds > 0 ? p.flops / p.seconds / 1e9 : 0.0,
                    p.seconds > 0 ? p.bytes / p.seconds / 1e9 : 0.0);
    }
    std::printf("(ops timed one by one with a device sync after each; step times above include "
                "that overhead)\n");
}

void run_bench(const BenchArgs& a) {
    ModelConfig cfg = a.model.resolve();
    MT_CHECK(a.seq <= cfg.max_seq_len, "--seq ", a.seq, " exceeds the model's max_seq_len ",
             cfg.max_seq_len);
    auto opened = a.dev.open();
    std::unique_ptr<ProfilingDevice> profiler;
    if (a.profile) profiler = std::make_unique<ProfilingDevice>(*opened);
    Device* device = profiler ? profiler.get() : opened.get();
    Model model(*device, cfg);
    model.init_weights(a.seed);
    TrainOptions opts;
    opts.total_steps = a.warmup + a.steps;
    Trainer trainer(model, opts);

    const int64_t n = static_cast<int64_t>(a.batch) * a.seq;
    std::mt19937 rng(static_cast<uint32_t>(a.seed));
    std::uniform_int_distribution<int32_t> tok(0, cfg.vocab_size - 1);
    std::vector<int32_t> x(n), y(n);
    for (auto& v : x) v = tok(rng);
    for (auto& v : y) v = tok(rng);

    ModelCost cost = model_cost(cfg);
    std::printf("bench: %s on %s, %.1fM params (%.1fM active matmul/token), B=%d T=%d\n",
                a.model.preset.empty() ? a.model.config_path.c_str() : a.model.preset.c_str(),
                device->name().c_str(), cost.total_params / 1e6, cost.active_matmul_params / 1e6,
                a.batch, a.seq);
    std::vector<double> ms;
    for (int i = 0; i < a.warmup + a.steps; ++i) {
        if (profiler && i == a.warmup) profiler->reset();
        auto t0 = std::chrono::steady_clock::now();
        StepStats st = trainer.step(x.data(), y.data(), a.batch, a.seq);
        device->synchronize();
        double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
        bool timed = i >= a.warmup;
        if (timed) ms.push_back(dt);
        std::printf("  step %d%s: %.1f ms, loss %.4f\n", i + 1, timed ? "" : " (warm-up)", dt,
                    st.loss.loss);
    }
    std::sort(ms.begin(), ms.end());
    double med = ms[ms.size() / 2];
    if (ms.size() % 2 == 0) med = 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
    double tps = n / (med / 1000.0);
    double gflops = cost.train_flops_per_token(a.seq) * tps / 1e9;
    if (profiler) print_profile(*profiler, a.steps);
    nlohmann::json j;
    j["tokens_per_s"] = tps;
    j["ms_per_step"] = med;
    j["gflops"] = gflops;
    j["mfu"] = gflops / a.peak_gflops;
    j["peak_rss_mb"] = peak_rss_mb();
    std::printf("median %.1f ms/step, %.0f tokens/s, %.1f GFLOP/s, MFU %.1f%% of %.0f GFLOP/s\n",
                med, tps, gflops, 100.0 * gflops / a.peak_gflops, a.peak_gflops);
    std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
    auto a = std::make_shared<BenchArgs>();
    auto* cmd = app.add_subcommand("bench", "time training steps; last line is JSON");
    a->model.add_options(cmd);
    a->dev.add_options(cmd);
    cmd->add_option("--batch", a->batch, "batch size B")->required()->check(positive());
    cmd->add_option("--seq", a->seq, "sequence length T")->required()->check(positive());
    cmd->add_option("--steps", a->steps, "timed steps")->capture_default_str()
        ->check(positive());
    cmd->add_option("--warmup", a->warmup, "untimed steps first")->capture_default_str()
        ->check(non_negative());
    cmd->add_option("--peak-gflops", a->peak_gflops, "device peak for MFU")->capture_default_str()
        ->check(positive());
    cmd->add_option("--seed", a->seed, "init and data seed")->capture_default_str();
    cmd->add_flag("--profile", a->profile, "print a per-op time table (share, GFLOP/s, GB/s)");
    cmd->callback([a, &exit_code] {
        run_bench(*a);
        exit_code = 0;
    });
}

}  // namespace moetrain::cli
