// `moetrain eval`: mean loss of a checkpoint over the first N windows of a split; the last
// stdout line is JSON {"ce","aux","z","loss","tokens"}.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "moetrain/checkpoint.h"
#include "moetrain/data.h"
#include "moetrain/memory_plan.h"
#include "run_guards.h"
#include "tokenizer_choice.h"
#include "train_support.h"

namespace moetrain::cli {
namespace {

struct EvalArgs {
    std::string precision = "fp32";
    DeviceChoice dev;
    std::string checkpoint, data, split = "val";
    TokenizerChoice tokenizer;
    bool tokenizer_given = false;
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
    {  // an upper bound of what the forward passes need: the training plan less its
       // gradients and optimizer state
        PlanOptions o;
        o.batch = a.batch;
        o.seq = a.seq;
        o.precision = parse_precision(a.precision);
        o.optimizer = OptimizerKind::sgd;
        const MemoryPlan p = plan_training_memory(cfg, o);
        check_memory_fits(p.total() - p.grads - p.optimizer, memory_available(a.dev.device, 0),
                          "this evaluation", a.dev.device);
    }
    auto tok = checkpoint_or_given_tokenizer(a.tokenizer, a.tokenizer_given, info);
    const std::string& spec = a.tokenizer_given ? a.tokenizer.spec : info.state.tokenizer;
    TokenData data = load_token_data(a.data, *tok, spec, cfg, a.val_tokens);
    auto device = a.dev.open();
    Model model(*device, cfg);
    model.set_precision(parse_precision(a.precision));
    load_weights(dir, model);
    const auto& tokens = a.split == "train" ? data.train : data.val;
    BatchLoader probe(tokens, a.batch, a.seq, a.split);  // validates the split is long enough
    Evaluator ev(model, tokens, a.batch, a.seq, a.batches);
    LossStats s = ev.run();
    std::printf("eval %s on %s split: %d batches of %dx%d, ce %.4f, loss %.4f\n", dir.c_str(),
                a.split.c_str(), a.batches, a.batch, a.seq, s.ce, s.loss);
    nlohmann::json j{
        {"ce", s.ce}, {"aux", s.aux}, {"z", s.z}, {"loss", s.loss}, {"tokens", s.tokens}};
    std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
    auto a = std::make_shared<EvalArgs>();
    auto* cmd = app.add_subcommand("eval", "evaluate a checkpoint; last line is JSON");
    add_precision_option(cmd, a->precision);
    add_checkpoint_option(cmd, a->checkpoint);
    cmd->add_option("--data", a->data, "text file, or token shards (a shard, a directory, a glob)")
        ->required();
    cmd->add_option("--split", a->split, "train | val")->capture_default_str();
    a->tokenizer.add_options(cmd);
    cmd->add_option("--val-tokens", a->val_tokens,
                    "shards without \"_val_\" files: the last N tokens are the val split")
        ->check(non_negative());
    cmd->add_option("--batch", a->batch, "batch size B")->required()->check(positive());
    cmd->add_option("--seq", a->seq, "sequence length T")->required()->check(positive());
    add_defaulted(cmd, "--batches", a->batches, "number of batches", positive());
    a->dev.add_options(cmd);
    on_run(cmd, exit_code, [a, cmd] {
        a->tokenizer_given = cmd->count("--tokenizer") > 0;
        run_eval(*a);
    });
}

}  // namespace moetrain::cli
