// The --log-json file of a training run, read back for `moetrain report`: one record per
// optimizer step and one per evaluation (docs: README "Using the CLI").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moetrain::cli {

struct LoggedLayerLoad {
    int layer = 0;
    double min_share = 0, max_share = 0;
    int empty = 0;
    std::vector<int64_t> counts;        // rows per expert (absent in logs of older versions)
    double dropped = 0;                 // share of selections a capacity dropped (MODEL.md 2)
    double bias_min = 0, bias_max = 0;  // the expert bias range (0 without one)
};

struct LoggedStep {
    int64_t step = 0;
    double loss = 0, ce = 0, aux = 0, z = 0, lr = 0, grad_norm = 0, tokens_per_s = 0;
    double loss_scale = 1;
    int64_t tokens_seen = -1;  // -1 when the log does not say
    bool skipped = false;
    std::vector<LoggedLayerLoad> expert_load;
};

struct LoggedEval {
    int64_t step = 0;
    std::string split;
    double loss = 0, ce = 0;
};

struct RunLog {
    std::vector<LoggedStep> steps;  // in file order; a resumed run's repeated steps replace
    std::vector<LoggedEval> evals;  // the earlier records of the same step
};

// Reads a --log-json file; throws one line naming the file and line of a malformed record.
RunLog read_run_log(const std::string& path);

}  // namespace moetrain::cli
