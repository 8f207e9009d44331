// `moetrain train`: the training loop of the CLI — data, schedule, progress lines, JSON log,
// periodic evaluation and atomic checkpoints, --init-from / --resume.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands.h"
#include "common.h"
#include "number_options.h"
#include "dist_run.h"
#include "io/checkpoint_meta.h"
#include "json_log.h"
#include "moetrain/memory_plan.h"
#include "run_guards.h"
#include "stop_signals.h"
#include "moetrain/checkpoint.h"
#include "moetrain/data.h"
#include "moetrain/model.h"
#include "moetrain/stop.h"
#include "moetrain/train.h"
#include "tensorboard_writer.h"
#include "tokenizer_choice.h"
#include "train_support.h"

namespace moetrain::cli {
namespace {

// Step counts (--steps, --warmup, --stop-at, --save-every, --eval-every): 2^40 is far beyond
// any run and leaves the step arithmetic room to spare.
constexpr int64_t kMaxSteps = int64_t{1} << 40;

struct TrainArgs {
    DeviceChoice dev;
    ModelChoice model;
    std::string data;
    TokenizerChoice tokenizer;
    int64_t val_tokens = -1, shuffle = -1;
    int64_t steps = 0, stop_at = -1;
    int batch = 0, seq = 0, accum = 1;
    std::string optimizer = "adamw", precision = "fp32";
    bool attention16 = false;
    double lr = 3e-4, min_lr = -1, wd = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8, clip = 1.0;
    int64_t warmup = 0;
    uint64_t seed = 1337;
    std::string init_from, resume, out;
    int64_t save_every = 0, eval_every = 0;
    int eval_batches = 10;
    std::string log_json, tensorboard;
    std::string recompute = "none";
    bool quiet = false;
    double memory_limit_gb = 0;
    std::string comm = "auto";  // communicator of a multi-rank launch (docs/DISTRIBUTED.md)
    int zero = 0;
    int expert_parallel = 1;  // ranks per expert-parallel group
    int overlap = 1;          // gradient all-reduce overlapped with the backward
    std::function<bool(const std::string&)> given;  // was the flag on the command line?
};

// The optimizer settings a flag sets one to one: v(flag, the argument, the TrainOptions field),
// in the order resume reports overrides.
template <typename Args, typename Options, typename Visitor>
void each_optimizer_setting(Args& a, Options& o, Visitor&& v) {
    v("--lr", a.lr, o.lr);
    v("--min-lr", a.min_lr, o.min_lr);
    v("--warmup", a.warmup, o.warmup);
    v("--wd", a.wd, o.wd);
    v("--b1", a.b1, o.b1);
    v("--b2", a.b2, o.b2);
    v("--eps", a.eps, o.eps);
    v("--clip", a.clip, o.clip);
    v("--accum", a.accum, o.accum);
}

// --resume continues the saved run: every training setting not given on the command line
// comes from state.json; one given explicitly overrides the saved value, and says so.
void adopt_resume_settings(TrainArgs& a, const TrainState& s) {
    auto same = [&](const char* flag, auto& arg, const auto& saved) {
        using T = std::decay_t<decltype(arg)>;
        T want = static_cast<T>(saved);
        if (!a.given(flag))
            arg = want;
        else if (arg != want)
            std::cout << "resume: " << flag << " " << arg << " overrides the checkpoint's " << want
                      << "\n";
    };
    const TrainOptions& o = s.options;
    same("--optimizer", a.optimizer, std::string(optimizer_name(o.optimizer)));
    same("--precision", a.precision, s.precision);
    each_optimizer_setting(a, o, same);
    same("--batch", a.batch, s.batch);
    same("--seq", a.seq, s.seq);
    same("--data", a.data, s.data_path);
    MT_CHECK(!a.given("--shuffle") || a.shuffle == s.shuffle_seed, "--resume: --shuffle ",
             a.shuffle, " differs from the checkpoint's ",
             s.shuffle_seed < 0 ? std::string("consecutive windows")
                                : "--shuffle " + std::to_string(s.shuffle_seed),
             "; its data position belongs to that order");
    a.shuffle = s.shuffle_seed;
    MT_CHECK(
        !a.given("--val-tokens") || a.val_tokens == s.val_tokens, "--resume: --val-tokens ",
        a.val_tokens, " differs from the checkpoint's ",
        s.val_tokens < 0 ? std::string("default (the last 10%)") : std::to_string(s.val_tokens),
        "; its data position belongs to that train split");
    a.val_tokens = s.val_tokens;
    same("--seed", a.seed, s.seed);
}

TrainOptions train_options(const TrainArgs& a) {
    TrainOptions o;
    try {
        o.optimizer = parse_optimizer(a.optimizer);
    } catch (const Error& e) {
        fail("--optimizer: ", e.what());
    }
    each_optimizer_setting(a, o, [](const char*, const auto& arg, auto& setting) {
        setting = static_cast<std::decay_t<decltype(setting)>>(arg);
    });
    o.min_lr = a.min_lr < 0 ? a.lr / 10 : a.min_lr;
    o.total_steps = std::max<int64_t>(1, a.steps);  // --steps 0 only writes the initial weights
    return o;
}

// The settings every rank of a launch must share (docs/DISTRIBUTED.md).
std::string arguments_fingerprint(const TrainArgs& a, const TrainOptions& o) {
    nlohmann::json j = {{"train", io::train_options_json(o)},
                        {"batch", a.batch},
                        {"seq", a.seq},
                        {"seed", a.seed},
                        {"precision", a.precision},
                        {"zero", a.zero},
                        {"expert_parallel", a.expert_parallel},
                        {"overlap", a.overlap},
                        {"stop_at", a.stop_at},
                        {"resume", a.resume},
                        {"init_from", a.init_from},
                        {"save_every", a.save_every}};
    return j.dump();
}

// Returns the exit status: 0, or 130 / 143 after a graceful stop by SIGINT / SIGTERM.
int run_train(TrainArgs& a, DistRun& dist) {
    const int ranks = dist.size();
    const Recompute recompute = parse_recompute(a.recompute);  // a run option, not saved
    // ---- model config: from the checkpoint we continue from, else --preset / --config ----
    std::string ckpt_dir;
    std::optional<CheckpointInfo> ckpt;
    if (!a.resume.empty() || !a.init_from.empty()) {
        const std::string& arg = a.resume.empty() ? a.init_from : a.resume;
        ckpt_dir = resolve_checkpoint(arg);
        ckpt = read_checkpoint_info(ckpt_dir);
        if (!ckpt->checksummed)
            std::fprintf(stderr,
                         "moetrain: warning: checkpoint %s has no checksums (written before "
                         "moetrain checksummed its checkpoints); its contents cannot be "
                         "verified\n",
                         ckpt_dir.c_str());
    }
    const bool resumed = !a.resume.empty();
    // Every output resolved and checked against every input before anything is written; the
    // resolved paths are the ones written.
    const std::vector<NamedPath> inputs = {
        {"--data", a.data}, {"--tokenizer", a.tokenizer.file()}, {"--config", a.model.config_path}};
    std::vector<NamedPath> with_ckpt = inputs;
    with_ckpt.push_back({resumed ? "--resume" : "--init-from", ckpt_dir});
    a.out = guard_output({"--out", a.out}, inputs, OutputKind::run_dir);
    a.log_json = guard_output({"--log-json", a.log_json}, with_ckpt, OutputKind::file);
    // TensorBoard adds new event files to its directory (a run directory too), never replaces.
    a.tensorboard = guard_output({"--tensorboard", a.tensorboard}, inputs, OutputKind::run_dir);
    if (!a.out.empty()) check_run_dir(a.out, resumed ? ckpt->state.step : 0, resumed);
    ModelConfig cfg;
    if (ckpt) {
        cfg = ckpt->config;
        if (a.model.given()) {
            ModelConfig want = a.model.resolve();
            MT_CHECK(config_to_json(want) == config_to_json(cfg),
                     a.resume.empty() ? "--init-from" : "--resume", ": checkpoint ", ckpt_dir,
                     " has a different model config than ",
                     a.model.preset.empty() ? "--config" : "--preset", " (",
                     describe_config_difference(cfg, want), ")");
        }
    } else {
        cfg = a.model.resolve();
    }
    if (!a.resume.empty()) {  // the checkpoint saves the global batch: ranks x --batch
        a.batch *= ranks;
        adopt_resume_settings(a, ckpt->state);
        MT_CHECK(a.batch % ranks == 0, "--resume: the checkpoint's global batch ", a.batch,
                 " does not split over ", ranks, " ranks; give --batch");
        a.batch /= ranks;
    }
    // Required for a fresh run; --resume takes them from the checkpoint.
    MT_CHECK(!a.data.empty(), "--data is required");
    MT_CHECK(a.batch > 0, "--batch is required");
    MT_CHECK(a.seq > 0, "--seq is required");
    MT_CHECK(a.seq <= cfg.max_seq_len, "--seq ", a.seq, " exceeds the model's max_seq_len ",
             cfg.max_seq_len);
    MT_CHECK(a.steps >= 0, "--steps must be >= 0");

    // ---- memory plan: a run that cannot fit fails now, not in a step ----
    {
        PlanOptions plan;
        plan.batch = a.batch;
        plan.seq = a.seq;
        plan.precision = parse_precision(a.precision);
        plan.optimizer = train_options(a).optimizer;  // "--optimizer: ..." when unknown
        plan.recompute = recompute;
        check_memory_fits(plan_training_memory(cfg, plan).total(),
                          memory_available(a.dev.device, a.memory_limit_gb), "this training run",
                          a.memory_limit_gb > 0 ? "--memory-limit" : a.dev.device);
    }
    // ---- data ----
    const RunTokenizer tok =
        run_tokenizer(a.tokenizer, a.given("--tokenizer"), a.resume.empty() ? nullptr : &*ckpt);
    TokenData data = load_token_data(a.data, *tok.tokenizer, tok.spec, cfg, a.val_tokens);
    const int64_t data_tokens =
        static_cast<int64_t>(data.train->size()) + static_cast<int64_t>(data.val->size());
    if (!a.resume.empty() && ckpt->state.data_tokens > 0)
        MT_CHECK(ckpt->state.data_tokens == data_tokens, "--resume: --data ", a.data, " has ",
                 data_tokens, " tokens but the checkpoint was trained on ", ckpt->state.data_tokens,
                 " (", ckpt->state.data_path, "); its data position belongs to that file");
    // Every rank reads the global batches (ranks x --batch rows) and keeps its own rows.
    const int global_batch = a.batch * ranks;
    BatchLoader train_loader(data.train, global_batch, a.seq, "train");
    if (a.shuffle >= 0) train_loader.set_shuffle(static_cast<uint64_t>(a.shuffle));
    if (a.eval_every > 0)  // fail now, not after the first steps
        BatchLoader(data.val, global_batch, a.seq, "val");

    // ---- device, model, optimizer ----
    a.dev.device = dist.rank_device(a.dev.device);     // one GPU per rank on a node
    a.dev.threads = dist.rank_threads(a.dev.threads);  // the node's cores shared by its ranks
    auto device = a.dev.open();
    Model model(*device, cfg);
    model.set_recompute(recompute);
    model.set_precision(parse_precision(a.precision));
    model.set_attention16(a.attention16);
    TrainOptions opts = train_options(a);
    if (ckpt)
        load_weights(ckpt_dir, model);
    else
        model.init_weights(a.seed);
    DistOptions dist_opts{&dist.comm(), a.zero};
    dist_opts.expert_parallel = a.expert_parallel;
    dist_opts.overlap = a.overlap == 1;
    Trainer trainer(model, opts, dist_opts);
    if (!a.resume.empty()) {
        trainer.gather_moments();  // ZeRO-1: whole moments to load into, then this rank's shard
        load_optimizer(ckpt_dir, trainer);  // moments and steps_done
        trainer.scatter_moments();
        train_loader.set_position(ckpt->state.train_pos);
    }
    dist.agree("", {{"model config", config_to_json(cfg)},
                    {"training data", data_fingerprint(data)},
                    {"training arguments", arguments_fingerprint(a, opts)},
                    {"start step", std::to_string(trainer.steps_done())}});
    if (ranks > 1)
        std::printf(
            "data parallel: %d ranks x B=%d (global batch %d), %s%s%s, optimizer state "
            "%.3f MB and %.3fM of the %.3fM parameters on this rank\n",
            ranks, a.batch, global_batch, a.zero ? "ZeRO-1" : "replicated optimizer",
            trainer.overlaps_gradients() ? ", gradient all-reduce overlapped with the backward"
                                         : "",
            a.expert_parallel > 1
                ? (", expert parallel " + std::to_string(a.expert_parallel) + " (" +
                   std::to_string(cfg.moe->n_experts / a.expert_parallel) + " experts per rank), " +
                   trainer.token_exchange() + " token exchange")
                      .c_str()
                : "",
            static_cast<double>(trainer.optimizer_state_bytes()) / 1e6,
            static_cast<double>(model.num_params()) / 1e6,
            static_cast<double>(model_cost(cfg).total_params) / 1e6);
    const int64_t start = trainer.steps_done();

    TrainState state;
    state.seed = a.seed;
    state.options = opts;
    state.batch = global_batch;
    state.seq = a.seq;
    tok.record(state);
    state.shuffle_seed = a.shuffle;
    state.val_tokens = a.val_tokens;
    state.data_path = a.data;
    state.data_tokens = data_tokens;
    std::string last_ckpt = a.resume.empty() ? "" : ckpt_dir;
    int64_t saved_step = -1;  // the step the last save() call was for, the same on every rank
    auto save = [&](const char* why) -> std::string {
        if (a.out.empty()) return "";
        saved_step = trainer.steps_done();
        trainer.gather_moments();  // ZeRO-1: the whole moments into rank 0's checkpoint
        struct Rescatter {
            Trainer& t;
            ~Rescatter() { t.scatter_moments(); }
        } rescatter{trainer};
        if (!dist.root()) return "";
        state.step = trainer.steps_done();
        state.train_pos = train_loader.position();
        // Never write a checkpoint that cannot be trained from: the update of this step may
        // have overflowed even though its loss was finite.
        for (float v : model.get_flat(model.params_flat()))
            MT_CHECK(std::isfinite(v), "weights became non-finite in step ", state.step,
                     " (learning rate too high?); not saving it; ",
                     last_ckpt.empty() ? "no checkpoint was written"
                                       : "last good checkpoint: " + last_ckpt);
        std::string dir = a.out + "/" + step_dir_name(state.step);
        try {
            save_checkpoint(dir, model, &trainer, state);
        } catch (const Error& e) {  // the run stops; say what is safe on disk
            fail(e.what(), "; step ", state.step, " was not saved; ",
                 last_ckpt.empty() ? "no checkpoint was written"
                                   : "last good checkpoint: " + last_ckpt);
        }
        if (!a.quiet || std::string(why) == "final") std::printf("saved %s\n", dir.c_str());
        return dir;
    };

    std::printf("train: %s, %.2fM params, device %s, %s, B=%d T=%d accum=%d, steps %lld..%lld%s\n",
                cfg.moe ? "MoE" : "dense", static_cast<double>(model_cost(cfg).total_params) / 1e6,
                device->name().c_str(), a.precision.c_str(), a.batch, a.seq, a.accum,
                static_cast<long long>(start), static_cast<long long>(a.steps),
                recompute == Recompute::none ? "" : (", recompute " + a.recompute).c_str());
    std::fflush(stdout);
    if (start > 0 && start >= a.steps) {
        std::printf("nothing to do: the checkpoint is at step %lld, --steps is %lld\n",
                    static_cast<long long>(start), static_cast<long long>(a.steps));
        return 0;
    }
    if (a.steps == 0) {
        MT_CHECK(!a.out.empty(), "--steps 0 writes the initial weights and needs --out RUNDIR");
        save("final");
        return 0;
    }

    std::unique_ptr<JsonLog> log;  // rank 0 writes the log
    if (!a.log_json.empty() && dist.root()) log = std::make_unique<JsonLog>(a.log_json, start > 0);
    // A log write that fails stops the run (docs/RELIABILITY.md): the step that was just
    // completed is saved first when there is a run directory (one process only: a save is a
    // collective of every rank, and only rank 0 writes the log).
    auto write_log = [&](const nlohmann::json& j) {
        if (!log) return;
        std::string err = log->write_line(j.dump());
        if (err.empty()) return;
        std::string saved = last_ckpt;
        if (!a.out.empty() && !dist.multi() && saved_step != trainer.steps_done())
            saved = save("final");
        fail("--log-json ", a.log_json, ": write failed after step ", trainer.steps_done(), ": ",
             err, saved.empty() ? "; no checkpoint was written" : "; saved " + saved);
    };
    std::unique_ptr<TensorBoardWriter> tb;  // rank 0: the --log-json records, as scalars
    if (!a.tensorboard.empty() && dist.root())
        tb = std::make_unique<TensorBoardWriter>(a.tensorboard);
    // From here on SIGINT / SIGTERM stop after the current step, or abandon an evaluation.
    stop_cooperatively(
        "moetrain: error: stopped at once by a second signal; the checkpoints written before "
        "are intact\n");
    // Under expert parallelism every rank runs the evaluation's collectives, so all of them
    // must abandon it at the same batch: they agree on the stop request before each one.
    auto eval_stop = [&]() -> int {
        int32_t v = stop_signal();
        if (dist.multi() && a.expert_parallel > 1)
            dist.comm().all_reduce(&v, 1, DType::i32, ReduceOp::max);
        return v;
    };
    Evaluator evaluator(model, data.val, global_batch, a.seq, a.eval_batches, eval_stop);
    ProgressPrinter progress(a.steps, start, static_cast<int64_t>(global_batch) * a.seq * a.accum,
                             a.quiet);

    const int64_t per_micro = static_cast<int64_t>(global_batch) * a.seq;
    std::vector<int32_t> xs(per_micro * a.accum), ys(per_micro * a.accum), xl, yl;
    const int64_t end = a.stop_at >= 0 ? std::min(a.steps, a.stop_at) : a.steps;
    while (trainer.steps_done() < end) {  // fp16 steps skipped on overflow are retried
        const auto data_t0 = std::chrono::steady_clock::now();
        for (int m = 0; m < a.accum; ++m)
            train_loader.next(xs.data() + m * per_micro, ys.data() + m * per_micro);
        const double data_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - data_t0)
                .count();
        dist.local_rows(xs, xl, a.batch, a.seq, a.accum);
        dist.local_rows(ys, yl, a.batch, a.seq, a.accum);
        StepStats st;
        const double comm_s0 = dist.comm().seconds_in_collectives();
        try {
            st = trainer.step(xl.data(), yl.data(), a.batch, a.seq);
        } catch (const Error& e) {
            fail(e.what(), last_ckpt.empty() ? "; no checkpoint was written"
                                             : "; last good checkpoint: " + last_ckpt);
        }
        if (st.run == StepRun::captured && !a.quiet)
            std::printf("cuda graphs: step %lld captured into a graph; later steps replay it\n",
                        static_cast<long long>(st.step));
        nlohmann::json j = progress.step(st, model.expert_load());
        j["data_ms"] = data_ms;  // the loader's share of the step (docs/BENCHMARKS.md)
        // This rank's time inside collectives during the step (docs/DISTRIBUTED.md): waiting
        // for data and for the other ranks. 0 in one process.
        j["comm_ms"] = 1e3 * (dist.comm().seconds_in_collectives() - comm_s0);
        write_log(j);
        if (tb) tb->step_record(j);
        bool last = trainer.steps_done() == end;
        if (!a.out.empty() &&
            (last || (a.save_every > 0 && trainer.steps_done() % a.save_every == 0)))
            last_ckpt = save(last ? "final" : "periodic");
        const bool eval_now =
            a.eval_every > 0 && (trainer.steps_done() % a.eval_every == 0 || last);
        // Rank 0 evaluates; under expert parallelism every rank of its group holds some of
        // the experts, so they all run the evaluation passes (each the whole batches).
        LossStats ev;
        std::string eval_stopped;  // "during the evaluation (...)" when a stop abandoned it
        int sig = 0;
        if (eval_now && (dist.root() || a.expert_parallel > 1)) {
            try {
                ev = evaluator.run();
            } catch (const Stopped& e) {
                eval_stopped = e.what();
                sig = e.code();
            }
        }
        if (eval_now && dist.root() && eval_stopped.empty()) {
            nlohmann::json e = evaluation_json(ev, trainer.steps_done(), "val", a.eval_batches);
            std::printf("eval step %lld: val loss %.4f (ce %.4f)\n",
                        static_cast<long long>(trainer.steps_done()), ev.loss, ev.ce);
            write_log(e);
            if (tb) tb->eval_record(e);
        }
        std::fflush(stdout);
        if (sig == 0) sig = stop_signal();
        if (dist.multi()) {  // every rank stops after the same step (a save is a collective)
            int32_t v = sig;
            dist.comm().all_reduce(&v, 1, DType::i32, ReduceOp::max);
            sig = v;
        }
        if (sig != 0 && (trainer.steps_done() < end || !eval_stopped.empty())) {
            const std::string here =
                a.out.empty() ? "" : a.out + "/" + step_dir_name(trainer.steps_done());
            if (!here.empty() && saved_step != trainer.steps_done()) last_ckpt = save("final");
            if (log) log->close();
            if (dist.root())
                std::fprintf(stderr, "moetrain: stopped by %s %s%safter step %lld; %s\n",
                             stop_signal_name(sig), eval_stopped.c_str(),
                             eval_stopped.empty() ? "" : ", abandoned, ",
                             static_cast<long long>(trainer.steps_done()),
                             here.empty()
                                 ? "no --out, nothing saved"
                                 : ("saved " + here + "; continue with --resume " + a.out).c_str());
            return 128 + sig;
        }
    }
    progress.finish();
    if (dist.multi() && !a.quiet)
        std::printf("communication: %.1f s inside collectives on rank %d since it started\n",
                    dist.comm().seconds_in_collectives(), dist.rank());
    if (trainer.skipped_steps() > 0)
        std::printf(
            "fp16: %lld steps skipped for overflowing gradients in this run so far; loss "
            "scale now %g\n",
            static_cast<long long>(trainer.skipped_steps()), trainer.loss_scale());
    if (log) {
        std::string err = log->close();
        MT_CHECK(err.empty(), "--log-json ", a.log_json, ": close failed: ", err);
    }
    return 0;
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
    const auto [a, cmd] = add_command<TrainArgs>(app, "train", "train a model on a text file");
    a->dev.add_options(cmd);
    a->model.add_options(cmd);
    cmd->add_option("--data", a->data,
                    "text file (90% train / 10% val), or token shards: a shard, a directory or "
                    "a glob; --resume: the checkpoint's");
    a->tokenizer.add_options(cmd);
    add_int_option(cmd, "--val-tokens", a->val_tokens,
                   "shards without \"_val_\" files: validate on the last N tokens (default 10%)",
                   int64_t{0});
    add_int_option(cmd, "--shuffle", a->shuffle,
                   "read the train windows in a permutation seeded by SEED, new every epoch",
                   int64_t{0});
    add_int_option(cmd, "--steps", a->steps, "total optimizer steps of the run (schedule length S)",
                   int64_t{0}, kMaxSteps)
        ->required();
    add_int_option(cmd, "--batch", a->batch, "batch size B (--resume: the checkpoint's)", 1);
    add_int_option(cmd, "--seq", a->seq, "sequence length T (--resume: the checkpoint's)", 1);
    add_int_option(cmd, "--accum", a->accum, "micro-batches per optimizer step", 1)
        ->capture_default_str();
    cmd->add_option("--optimizer", a->optimizer,
                    "adamw | adamw8bit (8-bit block-quantised moments) | sgd")
        ->capture_default_str();
    add_precision_option(cmd, a->precision);
    add_attention16_option(cmd, a->attention16);
    // A beta of 1 would divide by 1 - beta^t = 0 in the bias correction.
    const RealRange beta{0.0, 1.0, false, true};
    add_real_option(cmd, "--lr", a->lr, "peak learning rate", non_negative_real())
        ->capture_default_str();
    add_real_option(cmd, "--min-lr", a->min_lr, "final learning rate (default lr/10)",
                    non_negative_real());
    add_int_option(cmd, "--warmup", a->warmup, "warmup steps", int64_t{0}, kMaxSteps)
        ->capture_default_str();
    add_real_option(cmd, "--wd", a->wd, "AdamW weight decay", non_negative_real())
        ->capture_default_str();
    add_real_option(cmd, "--b1", a->b1, "AdamW beta1", beta)->capture_default_str();
    add_real_option(cmd, "--b2", a->b2, "AdamW beta2", beta)->capture_default_str();
    add_real_option(cmd, "--eps", a->eps, "AdamW epsilon", positive_real())->capture_default_str();
    add_real_option(cmd, "--clip", a->clip, "global-norm clip (0 = off)", non_negative_real())
        ->capture_default_str();
    add_int_option(cmd, "--seed", a->seed, "init seed", uint64_t{0})->capture_default_str();
    auto* init = cmd->add_option("--init-from", a->init_from,
                                 "start from a checkpoint's weights (fresh optimizer)");
    auto* resume = cmd->add_option("--resume", a->resume,
                                   "continue a checkpoint exactly (weights, moments, step, data)");
    init->excludes(resume);
    cmd->add_option("--out", a->out, "run directory for checkpoints RUNDIR/step_NNNNNN");
    add_int_option(cmd, "--save-every", a->save_every, "checkpoint every K steps (and at the end)",
                   int64_t{0}, kMaxSteps);
    add_int_option(cmd, "--eval-every", a->eval_every, "evaluate on the val split every K steps",
                   int64_t{0}, kMaxSteps);
    add_int_option(cmd, "--eval-batches", a->eval_batches, "val batches per evaluation", 1)
        ->capture_default_str();
    cmd->add_option("--log-json", a->log_json, "append one JSON object per step to FILE");
    cmd->add_option("--tensorboard", a->tensorboard,
                    "write TensorBoard event files (the --log-json scalars) into DIR");
    add_int_option(cmd, "--stop-at", a->stop_at,
                   "stop after this many steps, keeping the schedule of --steps", int64_t{0},
                   kMaxSteps);
    add_real_option(cmd, "--memory-limit", a->memory_limit_gb,
                    "GB this run may use (default: the device's memory); a larger plan fails "
                    "before step 1",
                    positive_real(1e6));
    cmd->add_flag("--quiet", a->quiet, "only evaluation, checkpoint and summary lines");
    cmd->add_option("--recompute", a->recompute,
                    "gradient checkpointing: none | block (keep layer inputs) | ffn (recompute "
                    "FFN / MoE internals); same gradients, less activation memory")
        ->capture_default_str();
    cmd->add_option("--comm", a->comm,
                    "communicator of an mpirun launch: auto (nccl for cuda, else mpi) | mpi | nccl")
        ->capture_default_str();
    add_int_option(cmd, "--zero", a->zero,
                   "1 = ZeRO-1: shard the (8-bit) AdamW moments over the ranks (mpirun -np N; with "
                   "--expert-parallel, AdamW: an expert's over the ranks holding it)",
                   0, 1)
        ->capture_default_str();
    add_int_option(cmd, "--expert-parallel", a->expert_parallel,
                   "E: groups of E ranks split the experts of every MoE layer (E divides the "
                   "experts and the ranks); routed rows go to their expert's rank (adamw8bit: "
                   "without --zero)",
                   1)
        ->capture_default_str();
    add_int_option(cmd, "--overlap", a->overlap,
                   "1 (over mpi): each layer's gradient all-reduce starts during the backward "
                   "(plain data parallelism) and the MoE token exchange overlaps the experts' "
                   "work (expert parallelism); 0: neither (the same results)",
                   0, 1)
        ->capture_default_str();
    a->given = [cmd](const std::string& flag) { return cmd->count(flag) > 0; };
    cmd->callback([a, &exit_code] {
        DistRun dist(a->comm, a->dev.device);
        int code = 0;  // 130 / 143 after a graceful stop
        exit_code = run_distributed(dist, [&] { code = run_train(*a, dist); });
        if (exit_code == 0) exit_code = code;
        // A stop that came after the last step: the run is complete, and says so.
        if (exit_code == 0 && !dist.multi()) exit_code = exit_status_after("train");
    });
}

}  // namespace moetrain::cli
