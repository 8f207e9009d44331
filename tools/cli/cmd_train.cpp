// `moetrain train`: the training loop of the CLI — data, schedule, progress lines, JSON log,
// periodic evaluation and atomic checkpoints, --init-from / --resume.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands.h"
#include "common.h"
#include "moetrain/checkpoint.h"
#include "moetrain/data.h"
#include "moetrain/model.h"
#include "moetrain/train.h"
#include "tokenizer_choice.h"
#include "train_support.h"

namespace moetrain::cli {
namespace {

struct TrainArgs {
    DeviceChoice dev;
    ModelChoice model;
    std::string data;
    TokenizerChoice tokenizer;
    int64_t val_tokens = -1, shuffle = -1;
    int64_t steps = 0, stop_at = -1;
    int batch = 0, seq = 0, accum = 1;
    std::string optimizer = "adamw", precision = "fp32";
    double lr = 3e-4, min_lr = -1, wd = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8, clip = 1.0;
    int64_t warmup = 0;
    uint64_t seed = 1337;
    std::string init_from, resume, out;
    int64_t save_every = 0, eval_every = 0;
    int eval_batches = 10;
    std::string log_json;
    std::string recompute = "none";
    bool quiet = false;
    std::function<bool(const std::string&)> given;  // was the flag on the command line?
};

// A fresh run must not write into a run directory that holds another run's checkpoints: its
// newest step would shadow ours for `--checkpoint RUNDIR` and `--resume RUNDIR`.
void refuse_used_run_dir(const std::string& out) {
    std::error_code ec;
    if (!std::filesystem::is_directory(out, ec)) return;
    std::string newest;
    for (const auto& e : std::filesystem::directory_iterator(out, ec)) {
        std::string n = e.path().filename().string();
        bool step = n.size() >= 11 && n.rfind("step_", 0) == 0 &&
                    n.find_first_not_of("0123456789", 5) == std::string::npos;
        if (step && n > newest) newest = n;
    }
    MT_CHECK(newest.empty(), "--out ", out, " already holds checkpoints (newest ", newest,
             "); continue that run with --resume ", out, " or choose another --out");
}

// --resume continues the saved run: every training setting not given on the command line
// comes from state.json; one given explicitly overrides the saved value, and says so.
void adopt_resume_settings(TrainArgs& a, const TrainState& s) {
    auto same = [&](const char* flag, auto& arg, auto saved) {
        using T = std::decay_t<decltype(arg)>;
        T want = static_cast<T>(saved);
        if (!a.given(flag)) arg = want;
        else if (arg != want)
            std::cout << "resume: " << flag << " " << arg << " overrides the checkpoint's "
                      << want << "\n";
    };
    const TrainOptions& o = s.options;
    same("--optimizer", a.optimizer, std::string(optimizer_name(o.optimizer)));
    same("--precision", a.precision, s.precision);
    same("--lr", a.lr, o.lr);
    same("--min-lr", a.min_lr, o.min_lr);
    same("--warmup", a.warmup, o.warmup);
    same("--wd", a.wd, o.wd);
    same("--b1", a.b1, o.b1);
    same("--b2", a.b2, o.b2);
    same("--eps", a.eps, o.eps);
    same("--clip", a.clip, o.clip);
    same("--accum", a.accum, o.accum);
    same("--batch", a.batch, s.batch);
    same("--seq", a.seq, s.seq);
    same("--data", a.data, s.data_path);
    MT_CHECK(!a.given("--shuffle") || a.shuffle == s.shuffle_seed, "--resume: --shuffle ",
             a.shuffle, " differs from the checkpoint's ",
             s.shuffle_seed < 0 ? std::string("consecutive windows")
                                : "--shuffle " + std::to_string(s.shuffle_seed),
             "; its data position belongs to that order");
    a.shuffle = s.shuffle_seed;
    same("--seed", a.seed, s.seed);
}

TrainOptions train_options(const TrainArgs& a) {
    TrainOptions o;
    try {
        o.optimizer = parse_optimizer(a.optimizer);
    } catch (const Error& e) {
        fail("--optimizer: ", e.what());
    }
    o.lr = a.lr;
    o.min_lr = a.min_lr < 0 ? a.lr / 10 : a.min_lr;
    o.warmup = a.warmup;
    o.total_steps = std::max<int64_t>(1, a.steps);  // --steps 0 only writes the initial weights
    o.wd = a.wd;
    o.b1 = a.b1;
    o.b2 = a.b2;
    o.eps = a.eps;
    o.clip = a.clip;
    o.accum = a.accum;
    return o;
}

void run_train(TrainArgs& a) {
    const Recompute recompute = parse_recompute(a.recompute);  // a run option, not saved
    // ---- model config: from the checkpoint we continue from, else --preset / --config ----
    std::string ckpt_dir;
    std::optional<CheckpointInfo> ckpt;
    if (!a.resume.empty() || !a.init_from.empty()) {
        const std::string& arg = a.resume.empty() ? a.init_from : a.resume;
        ckpt_dir = resolve_checkpoint(arg);
        ckpt = read_checkpoint_info(ckpt_dir);
    }
    if (a.resume.empty() && !a.out.empty()) refuse_used_run_dir(a.out);
    ModelConfig cfg;
    if (ckpt) {
        cfg = ckpt->config;
        if (a.model.given()) {
            ModelConfig want = a.model.resolve();
            MT_CHECK(config_to_json(want) == config_to_json(cfg),
                     a.resume.empty() ? "--init-from" : "--resume", ": checkpoint ", ckpt_dir,
                     " has a different model config than ", a.model.preset.empty() ? "--config" : "--preset",
                     " (", describe_config_difference(cfg, want), ")");
        }
    } else {
        cfg = a.model.resolve();
    }
    if (!a.resume.empty()) adopt_resume_settings(a, ckpt->state);
    // Required for a fresh run; --resume takes them from the checkpoint.
    MT_CHECK(!a.data.empty(), "--data is required");
    MT_CHECK(a.batch > 0, "--batch is required");
    MT_CHECK(a.seq > 0, "--seq is required");
    MT_CHECK(a.seq <= cfg.max_seq_len, "--seq ", a.seq, " exceeds the model's max_seq_len ",
             cfg.max_seq_len);
    MT_CHECK(a.steps >= 0, "--steps must be >= 0");

    // ---- data ----
    const RunTokenizer tok =
        run_tokenizer(a.tokenizer, a.given("--tokenizer"), a.resume.empty() ? nullptr : &*ckpt);
    TokenData data = load_token_data(a.data, *tok.tokenizer, tok.spec, cfg, a.val_tokens);
    const int64_t data_tokens =
        static_cast<int64_t>(data.train->size()) + static_cast<int64_t>(data.val->size());
    if (!a.resume.empty() && ckpt->state.data_tokens > 0)
        MT_CHECK(ckpt->state.data_tokens == data_tokens, "--resume: --data ", a.data, " has ",
                 data_tokens, " tokens but the checkpoint was trained on ",
                 ckpt->state.data_tokens, " (", ckpt->state.data_path,
                 "); its data position belongs to that file");
    BatchLoader train_loader(data.train, a.batch, a.seq, "train");
    if (a.shuffle >= 0) train_loader.set_shuffle(static_cast<uint64_t>(a.shuffle));
    if (a.eval_every > 0)  // fail now, not after the first steps
        BatchLoader(data.val, a.batch, a.seq, "val");

    // ---- device, model, optimizer ----
    auto device = a.dev.open();
    Model model(*device, cfg);
    model.set_recompute(recompute);
    model.set_precision(parse_precision(a.precision));
    TrainOptions opts = train_options(a);
    if (ckpt) load_weights(ckpt_dir, model);
    else model.init_weights(a.seed);
    Trainer trainer(model, opts);
    if (!a.resume.empty()) {
        load_optimizer(ckpt_dir, trainer);  // moments and steps_done
        train_loader.set_position(ckpt->state.train_pos);
    }
    const int64_t start = trainer.steps_done();

    TrainState state;
    state.seed = a.seed;
    state.options = opts;
    state.batch = a.batch;
    state.seq = a.seq;
    tok.record(state);
    state.shuffle_seed = a.shuffle;
    state.data_path = a.data;
    state.data_tokens = data_tokens;
    std::string last_ckpt = a.resume.empty() ? "" : ckpt_dir;
    auto save = [&](const char* why) -> std::string {
        if (a.out.empty()) return "";
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
        save_checkpoint(dir, model, &trainer, state);
        if (!a.quiet || std::string(why) == "final") std::printf("saved %s\n", dir.c_str());
        return dir;
    };

    std::printf("train: %s, %.2fM params, device %s, %s, B=%d T=%d accum=%d, steps %lld..%lld%s\n",
                cfg.moe ? "MoE" : "dense", model.num_params() / 1e6, device->name().c_str(),
                a.precision.c_str(), a.batch, a.seq, a.accum, static_cast<long long>(start),
                static_cast<long long>(a.steps),
                recompute == Recompute::none ? "" : (", recompute " + a.recompute).c_str());
    std::fflush(stdout);
    if (start > 0 && start >= a.steps) {
        std::printf("nothing to do: the checkpoint is at step %lld, --steps is %lld\n",
                    static_cast<long long>(start), static_cast<long long>(a.steps));
        return;
    }
    if (a.steps == 0) {
        MT_CHECK(!a.out.empty(), "--steps 0 writes the initial weights and needs --out RUNDIR");
        save("final");
        return;
    }

    std::unique_ptr<std::ofstream> log;
    if (!a.log_json.empty()) {
        auto parent = std::filesystem::path(a.log_json).parent_path();
        std::error_code ec;
        if (!parent.empty()) std::filesystem::create_directories(parent, ec);
        log = std::make_unique<std::ofstream>(a.log_json, start > 0 ? std::ios::app : std::ios::trunc);
        MT_CHECK(*log, "--log-json: cannot write ", a.log_json);
    }
    Evaluator evaluator(model, data.val, a.batch, a.seq, a.eval_batches);
    ProgressPrinter progress(a.steps, start, static_cast<int64_t>(a.batch) * a.seq * a.accum, a.quiet);

    const int64_t per_micro = static_cast<int64_t>(a.batch) * a.seq;
    std::vector<int32_t> xs(per_micro * a.accum), ys(per_micro * a.accum);
    const int64_t end = a.stop_at >= 0 ? std::min(a.steps, a.stop_at) : a.steps;
    while (trainer.steps_done() < end) {  // fp16 steps skipped on overflow are retried
        for (int m = 0; m < a.accum; ++m)
            train_loader.next(xs.data() + m * per_micro, ys.data() + m * per_micro);
        StepStats st;
        try {
            st = trainer.step(xs.data(), ys.data(), a.batch, a.seq);
        } catch (const Error& e) {
            fail(e.what(), last_ckpt.empty() ? "; no checkpoint was written"
                                             : "; last good checkpoint: " + last_ckpt);
        }
        if (st.run == StepRun::captured && !a.quiet)
            std::printf("cuda graphs: step %lld captured into a graph; later steps replay it\n",
                        static_cast<long long>(st.step));
        nlohmann::json j = progress.step(st, model.expert_load());
        if (log) *log << j.dump() << "\n" << std::flush;
        bool last = trainer.steps_done() == end;
        if (!a.out.empty() && (last || (a.save_every > 0 && trainer.steps_done() % a.save_every == 0)))
            last_ckpt = save(last ? "final" : "periodic");
        if (a.eval_every > 0 && (trainer.steps_done() % a.eval_every == 0 || last)) {
            LossStats ev = evaluator.run();
            nlohmann::json e = evaluation_json(ev, trainer.steps_done(), "val", a.eval_batches);
            std::printf("eval step %lld: val loss %.4f (ce %.4f)\n",
                        static_cast<long long>(trainer.steps_done()), ev.loss, ev.ce);
            if (log) *log << e.dump() << "\n" << std::flush;
        }
        std::fflush(stdout);
    }
    progress.finish();
    if (trainer.skipped_steps() > 0)
        std::printf("fp16: %lld steps skipped for overflowing gradients in this run so far; loss "
                    "scale now %g\n",
                    static_cast<long long>(trainer.skipped_steps()), trainer.loss_scale());
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
    auto a = std::make_shared<TrainArgs>();
    auto* cmd = app.add_subcommand("train", "train a model on a text file");
    a->dev.add_options(cmd);
    a->model.add_options(cmd);
    cmd->add_option("--data", a->data,
                    "text file (90% train / 10% val), or token shards: a shard, a directory or "
                    "a glob; --resume: the checkpoint's");
    a->tokenizer.add_options(cmd);
    cmd->add_option("--val-tokens", a->val_tokens,
                    "shards without \"_val_\" files: validate on the last N tokens (default 10%)")
        ->check(non_negative());
    cmd->add_option("--shuffle", a->shuffle,
                    "read the train windows in a permutation seeded by SEED, new every epoch")
        ->check(non_negative());
    cmd->add_option("--steps", a->steps, "total optimizer steps of the run (schedule length S)")
        ->required()->check(non_negative());
    cmd->add_option("--batch", a->batch, "batch size B (--resume: the checkpoint's)")
        ->check(positive());
    cmd->add_option("--seq", a->seq, "sequence length T (--resume: the checkpoint's)")
        ->check(positive());
    cmd->add_option("--accum", a->accum, "micro-batches per optimizer step")->capture_default_str()
        ->check(positive());
    cmd->add_option("--optimizer", a->optimizer,
                    "adamw | adamw8bit (8-bit block-quantised moments) | sgd")
        ->capture_default_str();
    add_precision_option(cmd, a->precision);
    cmd->add_option("--lr", a->lr, "peak learning rate")->capture_default_str()->check(non_negative());
    cmd->add_option("--min-lr", a->min_lr, "final learning rate (default lr/10)")->check(non_negative());
    cmd->add_option("--warmup", a->warmup, "warmup steps")->capture_default_str()->check(non_negative());
    cmd->add_option("--wd", a->wd, "AdamW weight decay")->capture_default_str()->check(non_negative());
    cmd->add_option("--b1", a->b1, "AdamW beta1")->capture_default_str()->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--b2", a->b2, "AdamW beta2")->capture_default_str()->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--eps", a->eps, "AdamW epsilon")->capture_default_str()->check(positive());
    cmd->add_option("--clip", a->clip, "global-norm clip (0 = off)")->capture_default_str()->check(non_negative());
    cmd->add_option("--seed", a->seed, "init seed")->capture_default_str();
    auto* init = cmd->add_option("--init-from", a->init_from, "start from a checkpoint's weights (fresh optimizer)");
    auto* resume = cmd->add_option("--resume", a->resume, "continue a checkpoint exactly (weights, moments, step, data)");
    init->excludes(resume);
    cmd->add_option("--out", a->out, "run directory for checkpoints RUNDIR/step_NNNNNN");
    cmd->add_option("--save-every", a->save_every, "checkpoint every K steps (and at the end)")->check(non_negative());
    cmd->add_option("--eval-every", a->eval_every, "evaluate on the val split every K steps")->check(non_negative());
    cmd->add_option("--eval-batches", a->eval_batches, "val batches per evaluation")->capture_default_str()->check(positive());
    cmd->add_option("--log-json", a->log_json, "append one JSON object per step to FILE");
    cmd->add_option("--stop-at", a->stop_at, "stop after this many steps, keeping the schedule of --steps")->check(non_negative());
    cmd->add_flag("--quiet", a->quiet, "only evaluation, checkpoint and summary lines");
    cmd->add_option("--recompute", a->recompute,
                    "gradient checkpointing: none | block (keep layer inputs) | ffn (recompute "
                    "FFN / MoE internals); same gradients, less activation memory")
        ->capture_default_str();
    a->given = [cmd](const std::string& flag) { return cmd->count(flag) > 0; };
    cmd->callback([a, &exit_code] {
        run_train(*a);
        exit_code = 0;
    });
}

}  // namespace moetrain::cli
