// Pieces of the training CLI that are not the loop itself: evaluation over the first N
// windows of a split, the per-step progress line / JSON record, config difference messages.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "moetrain/data.h"
#include "moetrain/model.h"
#include "moetrain/stop.h"
#include "moetrain/train.h"

namespace moetrain::cli {

// Mean of per-batch means over the first `batches` windows of `tokens` (MODEL.md 5).
// Before each batch run() asks `stop` (default: moetrain::stop_requested) and throws
// moetrain::Stopped "during the evaluation (batch K of N)" when it returns a signal.
class Evaluator {
  public:
    Evaluator(Model& model, TokenStream tokens, int batch, int seq, int batches,
              std::function<int()> stop = stop_requested);
    LossStats run();

  private:
    Model& model_;
    TokenStream tokens_;
    int batch_, seq_, batches_;
    std::function<int()> stop_;
};

nlohmann::json evaluation_json(const LossStats& s, int64_t step, const std::string& split,
                               int batches);

// Prints one progress line per step (step/total, loss terms, lr, grad norm, tokens/s,
// elapsed, ETA; expert load for MoE) and returns the same fields as a JSON object.
class ProgressPrinter {
  public:
    ProgressPrinter(int64_t total_steps, int64_t start_step, int64_t tokens_per_step, bool quiet);
    nlohmann::json step(const StepStats& s, const std::vector<ExpertLoad>& load);
    void finish();

  private:
    int64_t total_, start_, tokens_per_step_;
    bool quiet_;
    std::chrono::steady_clock::time_point t0_, last_;
    double last_loss_ = 0;
    int64_t last_step_ = 0;
};

// "n_layers: 4 vs 2" for the first differing key of two configs.
std::string describe_config_difference(const ModelConfig& have, const ModelConfig& want);

}  // namespace moetrain::cli
