// `moetrain eval`: mean loss of a checkpoint over the first N windows of a split; the last
// stdout line is JSON {"ce","aux","z","loss","tokens"}.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "number_options.h"
#include "moetrain/checkpoint.h"
#include "moetrain/data.h"
#include "moetrain/stop.h"
#include "saved_model.h"
#include "tokenizer_choice.h"
#include "train_support.h"

namespace moetrain::cli {
namespace {

struct EvalArgs : SavedModelArgs {
    std::string data, split = "val";
    int64_t val_tokens = -1;
    int batch = 0, seq = 0, batches = 10;
};

void run_eval(const EvalArgs& a) {
    MT_CHECK(a.split == "train" || a.split == "val", "--split must be train or val, not '", a.split,
             "'");
    std::string dir = resolve_checkpoint(a.checkpoint);
    CheckpointInfo info = read_checkpoint_info(dir);
    const ModelConfig& cfg = info.config;
    MT_CHECK(a.seq <= cfg.max_seq_len, "--seq ", a.seq, " exceeds the model's max_seq_len ",
             cfg.max_seq_len);
    check_forward_fits(a, cfg, a.batch, a.seq, 0, "this evaluation");  // an upper bound
    auto tok = checkpoint_or_given_tokenizer(a.tokenizer, a.tokenizer_given, info);
    const std::string& spec = a.tokenizer_given ? a.tokenizer.spec : info.state.tokenizer;
    TokenData data = load_token_data(a.data, *tok, spec, cfg, a.val_tokens);
    const LoadedModel loaded = load_saved_model(a, dir, cfg);
    Model& model = *loaded.model;
    const auto& tokens = a.split == "train" ? data.train : data.val;
    BatchLoader probe(tokens, a.batch, a.seq, a.split);  // validates the split is long enough
    // Before each batch: a progress line at most every 5 seconds (a long evaluation shows
    // that it runs), and the stop request, which ends the evaluation there.
    const auto t0 = std::chrono::steady_clock::now();
    double last_report = 0;
    int batch = 0;
    auto before_batch = [&] {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s - last_report >= 5) {
            std::printf("eval: %d / %d batches, %s\n", batch, a.batches,
                        format_duration(s).c_str());
            std::fflush(stdout);
            last_report = s;
        }
        ++batch;
        return stop_requested();
    };
    Evaluator ev(model, tokens, a.batch, a.seq, a.batches, before_batch);
    stop_cooperatively();  // a stop ends the evaluation before its next batch
    LossStats s;
    try {
        s = ev.run();
    } catch (const Stopped& e) {
        throw Stopped(e.code(), std::string(e.what()) + "; no result, eval writes no files");
    }
    std::printf("eval %s on %s split: %d batches of %dx%d, ce %.4f, loss %.4f\n", dir.c_str(),
                a.split.c_str(), a.batches, a.batch, a.seq, s.ce, s.loss);
    nlohmann::json j{
        {"ce", s.ce}, {"aux", s.aux}, {"z", s.z}, {"loss", s.loss}, {"tokens", s.tokens}};
    std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
    const auto [a, cmd] =
        add_command<EvalArgs>(app, "eval", "evaluate a checkpoint; last line is JSON");
    add_saved_model_options(cmd, *a);
    cmd->add_option("--data", a->data, "text file, or token shards (a shard, a directory, a glob)")
        ->required();
    cmd->add_option("--split", a->split, "train | val")->capture_default_str();
    a->tokenizer.add_options(cmd);
    add_int_option(cmd, "--val-tokens", a->val_tokens,
                   "shards without \"_val_\" files: the last N tokens are the val split",
                   int64_t{0});
    add_int_option(cmd, "--batch", a->batch, "batch size B", 1)->required();
    add_int_option(cmd, "--seq", a->seq, "sequence length T", 1)->required();
    add_int_option(cmd, "--batches", a->batches, "number of batches", 1)->capture_default_str();
    a->dev.add_options(cmd);
    on_run(cmd, exit_code, [a, cmd] {
        a->tokenizer_given = cmd->count("--tokenizer") > 0;
        run_eval(*a);
    });
}

}  // namespace moetrain::cli
