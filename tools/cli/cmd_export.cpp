// `moetrain export --checkpoint CKPT --format hf --out DIR`: a checkpoint as a transformers
// model directory (docs/INTEROP.md), or one line naming why no transformers class computes
// the same function.
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "number_options.h"
#include "moetrain/checkpoint.h"
#include "moetrain/hf.h"
#include "run_guards.h"

namespace moetrain::cli {
namespace {

struct ExportArgs {
    std::string checkpoint, format = "hf", out;
    double max_shard_mb = 5000;
};

void run_export(const ExportArgs& a) {
    stop_cooperatively();  // export_hf stops between tensors and removes its temporary
    const std::string dir = resolve_checkpoint(a.checkpoint);
    const std::string out =
        guard_output({"--out", a.out}, {{"--checkpoint", dir}}, OutputKind::dir);
    HfExportOptions o;
    o.max_shard_bytes = static_cast<int64_t>(a.max_shard_mb * 1e6);
    const HfResult r = export_hf(dir, out, o);
    std::printf("exported %s as %s to %s (", dir.c_str(), r.architecture.c_str(), a.out.c_str());
    for (size_t i = 0; i < r.files.size(); ++i)
        std::printf("%s%s", i ? ", " : "", r.files[i].c_str());
    std::printf(")\n");
    for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
    const auto [a, cmd] =
        add_command<ExportArgs>(app, "export", "write a checkpoint in another format");
    add_checkpoint_option(cmd, a->checkpoint);
    add_defaulted(cmd, "--format", a->format, "hf: a transformers model directory",
                  CLI::IsMember({"hf"}));
    cmd->add_option("--out", a->out,
                    "output directory: new, empty, or an earlier export (replaced atomically)")
        ->required();
    add_real_option(cmd, "--max-shard-mb", a->max_shard_mb,
                    "split the weights into shards with an index above this size (MB)",
                    positive_real(1e9))
        ->capture_default_str();
    on_run(cmd, exit_code, [a] { run_export(*a); });
}

}  // namespace moetrain::cli
