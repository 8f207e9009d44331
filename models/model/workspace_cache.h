// WorkspaceCache: a Model's planned workspaces (workspace.h), one per batch shape, and the
// settings they are planned with: the gradient checkpointing mode, whether mixed-precision
// training workspaces store activations in 16 bits, and the bound on the logits chunk.
#pragma once

#include <map>
#include <memory>
#include <tuple>

#include "model/param_store.h"
#include "model/workspace.h"

namespace moetrain {

class WorkspaceCache {
  public:
    WorkspaceCache(Device& dev, const ModelConfig& cfg, const ParamStore& store);

    // Bound on the logits chunk (elements) of workspaces planned from now on; tests shrink it
    // to exercise the chunked head. Inference workspaces take at most kInferenceLogitBudget,
    // and every chunk fits the device's largest buffer (Device::max_buffer_bytes).
    int64_t logit_budget = kLogitBudget;

    // The workspace of shape (B, T), planned on first use (valid until the next call). A
    // training workspace of the same shape serves inference too.
    Workspace& get(int B, int T, bool training);

    // Gradient checkpointing of the training workspaces planned from now on (set_recompute
    // drops the training workspaces planned with another mode).
    Recompute recompute() const { return recompute_; }
    void set_recompute(Recompute r);
    // bf16 / fp16: whether training workspaces store the activations only matrix products
    // read in the 16-bit compute dtype (default) or in f32 (bit-identical results; tests
    // compare the two). Drops the training workspaces planned with the other setting.
    bool activations16() const { return activations16_; }
    void set_activations16(bool on);
    // Drops the training workspaces (their 16-bit activations change dtype with the precision).
    void drop_training();

  private:
    // Inference workspaces are dropped when a fifth shape arrives (a workspace is only used
    // within one call, so no reference outlives this).
    static constexpr int kMaxInferenceWorkspaces = 4;

    Device& dev_;
    const ModelConfig& cfg_;
    const ParamStore& store_;  // its precision: the dtype of 16-bit activations
    Recompute recompute_ = Recompute::none;
    bool activations16_ = true;
    std::map<std::tuple<int, int, bool>, std::unique_ptr<Workspace>> workspaces_;
};

}  // namespace moetrain
