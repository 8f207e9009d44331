// Checks the CLI makes before a run spends any compute, so that a mistake costs nothing:
// outputs that would overwrite inputs or another run's checkpoints, output directories that
// cannot be written, and plans that exceed the memory there is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moetrain/config.h"
#include "moetrain/memory_plan.h"

namespace moetrain::cli {

// The one guard of every output path a command writes (a file, a directory it writes into
// or replaces, a run directory). `out.path` is resolved first (io/out_path.h: `..` against
// the real parent, links followed, so `MISSING/../EXISTING` is EXISTING), then refused with
// one line when it
//  - is, lies inside, or contains one of `inputs` ({flag, path} pairs: files, directories
//    or globs, resolved the same way; empty paths are skipped);
//  - is or lies inside a checkpoint directory (one holding state.json, or a step_NNNNNN
//    directory holding model.safetensors);
//  - is a training run's directory (one holding step_NNNNNN checkpoints), unless `kind` is
//    OutputKind::run_dir (train --out, which check_run_dir checks).
// Returns the resolved path ("" for an empty one), which the command then writes.
struct NamedPath {
    std::string flag, path;
};
enum class OutputKind { file, dir, run_dir };
std::string guard_output(const NamedPath& out, const std::vector<NamedPath>& inputs,
                         OutputKind kind);

// The run directory --out of a training run that starts after step `start` (0 for a fresh
// run): refused when it holds another run's checkpoints (a fresh run: any step; a resumed
// run: a step newer than `start`, which this run would replace or hide). Then it is created
// and a probe entry is made and removed in it, so that an unwritable --out fails now and
// not at the first save.
void check_run_dir(const std::string& out, int64_t start, bool resumed);

// Fails with "... needs X GB, Y GB available" when `needed` bytes exceed `available`.
void check_memory_fits(double needed, double available, const std::string& what,
                       const std::string& where);

// Bytes available for a run on `device_spec`: --memory-limit GB when given (> 0), else the
// device's memory as the registry lists it (0 when unknown).
double memory_available(const std::string& device_spec, double memory_limit_gb);

}  // namespace moetrain::cli
