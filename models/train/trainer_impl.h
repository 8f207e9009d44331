// The Trainer's state behind api/moetrain/train.h (which shows only what an embedder uses):
// the step counters, the loss scale, the optimizer state and the gradient-sync strategy that
// trains it over ranks (train/sync/grad_sync.h).
#pragma once

#include <cstdint>
#include <memory>

#include "moetrain/train.h"
#include "train/sync/grad_sync.h"

namespace moetrain {

struct Trainer::Impl {
    Impl(Model& model, const TrainOptions& opts, const DistOptions& dist);
    StepStats step(const int32_t* xs, const int32_t* ys, int B, int T);
    int64_t optimizer_state_bytes() const;
    void set_loss_scale_state(double scale, int64_t clean, int64_t skipped);

    Model& model_;
    TrainOptions opts_;
    int64_t step_ = 0;
    double loss_scale_ = 1;
    int64_t clean_steps_ = 0, skipped_steps_ = 0;
    OptimizerState state_;
    Tensor stats_;  // small device buffer: grad norm^2 etc.
    std::unique_ptr<GradSync> sync_;

  private:
    // The AdamW / 8-bit AdamW / SGD update of the segments this rank owns.
    void update(double lr, float inv_scale);
};

}  // namespace moetrain
