// WorkspaceCache (workspace_cache.h): the planned workspaces by (B, T, training).
#include "model/workspace_cache.h"

#include <algorithm>
#include <utility>

namespace moetrain {

WorkspaceCache::WorkspaceCache(Device& dev, const ModelConfig& cfg, const ParamStore& store)
    : dev_(dev), cfg_(cfg), store_(store) {}

Workspace& WorkspaceCache::get(int B, int T, bool training) {
    if (!training) {  // a training workspace of the same shape serves inference too
        auto it = workspaces_.find({B, T, true});
        if (it != workspaces_.end()) return *it->second;
    }
    const std::tuple<int, int, bool> key{B, T, training};
    auto it = workspaces_.find(key);
    if (it != workspaces_.end()) return *it->second;
    if (!training) {  // bound the inference shapes kept (generation, varying eval lengths)
        int kept = 0;
        for (const auto& [k, ws] : workspaces_) kept += !std::get<2>(k);
        if (kept >= kMaxInferenceWorkspaces)
            std::erase_if(workspaces_, [](const auto& kv) { return !std::get<2>(kv.first); });
    }
    auto& slot = workspaces_[key];
    const DType stored16 = activations16_ ? compute_dtype(store_.precision) : DType::f32;
    // The logits chunk: the training bound, the smaller inference one, and a buffer the device
    // can allocate at all (an OpenCL device's largest allocation).
    int64_t budget = training ? logit_budget : std::min(logit_budget, kInferenceLogitBudget);
    const size_t max_floats = dev_.max_buffer_bytes() / sizeof(float);
    if (max_floats < static_cast<size_t>(budget)) budget = static_cast<int64_t>(max_floats);
    slot = plan_workspace(dev_, cfg_, B, T, training, budget, recompute_, stored16,
                          compute_dtype(store_.precision));
    return *slot;
}

void WorkspaceCache::set_recompute(Recompute r) {
    if (r == recompute_) return;
    recompute_ = r;
    drop_training();
}

void WorkspaceCache::set_activations16(bool on) {
    if (on == activations16_) return;
    activations16_ = on;
    drop_training();
}

void WorkspaceCache::drop_training() {
    std::erase_if(workspaces_, [](const auto& kv) { return std::get<2>(kv.first); });
}

}  // namespace moetrain
