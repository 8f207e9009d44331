// `moetrain import --from DIR --out CKPT`: a transformers model directory (GPT-2, Llama,
// Mixtral, Qwen2-MoE layouts; docs/INTEROP.md) as a weights-only checkpoint that
// `moetrain train --init-from CKPT` fine-tunes.
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "moetrain/hf.h"
#include "run_guards.h"

namespace moetrain::cli {
namespace {

struct ImportArgs {
    std::string from, out;
    bool no_tokenizer = false;
};

void run_import(const ImportArgs& a) {
    stop_cooperatively();  // import_hf stops between tensors, before the checkpoint is begun
    HfImportOptions o;
    o.tokenizer = !a.no_tokenizer;
    const std::string out = guard_output({"--out", a.out}, {{"--from", a.from}}, OutputKind::dir);
    const HfResult r = import_hf(a.from, out, o);
    std::printf("imported %s (%s, %s%d layers, d_model %d, vocab %d) to %s\n", a.from.c_str(),
                r.architecture.c_str(),
                r.config.moe
                    ? ("MoE " + std::to_string(r.config.moe->n_experts) + " experts, ").c_str()
                    : "",
                r.config.n_layers, r.config.d_model, r.config.vocab_size, a.out.c_str());
    for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
}

}  // namespace

void add_import_command(CLI::App& app, int& exit_code) {
    const auto [a, cmd] = add_command<ImportArgs>(
        app, "import", "make a checkpoint from a transformers model directory");
    cmd->add_option("--from", a->from, "directory with config.json and safetensors weights")
        ->required();
    cmd->add_option("--out", a->out, "checkpoint directory to create")->required();
    cmd->add_flag("--no-tokenizer", a->no_tokenizer,
                  "leave DIR/tokenizer.json out (else it becomes the checkpoint's tokenizer)");
    on_run(cmd, exit_code, [a] { run_import(*a); });
}

}  // namespace moetrain::cli
