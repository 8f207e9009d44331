// RoutingState (routing_state.h): expert loads, expert bias and the per-pass routing state.
#include "model/routing_state.h"

#include <algorithm>
#include <string>

namespace moetrain {

RoutingState::RoutingState(Device& dev, const ModelConfig& cfg, const ParallelContext& parallel)
    : dev_(dev), cfg_(cfg), parallel_(parallel) {
    for (int l = 0; l < cfg.n_layers; ++l)
        moe_row_.push_back(cfg.is_moe_layer(l) ? moe_layers_++ : -1);
    if (moe_layers_ == 0) return;
    const MoeConfig& m = *cfg.moe;
    const int64_t E = m.n_experts;
    load_counts = dev.alloc(DType::i32, {moe_layers_, E});
    if (m.capacity_factor > 0) kept_counts = dev.alloc(DType::i32, {moe_layers_, E});
    if (!m.has_expert_bias()) return;
    expert_bias = dev.alloc(DType::f32, {moe_layers_, E});  // starts at 0 (MODEL.md 2)
    step_counts = dev.alloc(DType::i32, {moe_layers_, E});
    for (int l = 0; l < cfg.n_layers; ++l) {
        if (row(l) < 0) continue;
        ParamInfo b;
        b.name = "layers." + std::to_string(l) + ".moe.router.expert_bias";
        b.shape = {E};
        b.offset = row(l) * E;
        buffer_layout.push_back(b);
    }
}

void RoutingState::begin_step_counts() {
    if (step_counts) dev_.fill(step_counts, 0.0f);
}

void RoutingState::update_expert_bias() {
    if (!expert_bias) return;
    const int64_t E = cfg_.moe->n_experts;
    for (const ParamInfo& b : buffer_layout)
        dev_.expert_bias_update(expert_bias.view(b.offset, {E}), step_counts.view(b.offset, {E}), E,
                                cfg_.moe->bias_update_rate);
}

void RoutingState::begin_pass(bool over_ranks, bool train_step) {
    over_ranks_ = over_ranks;
    train_step_ = train_step;
}

void RoutingState::end_pass() {
    over_ranks_ = false;
    train_step_ = false;
    load_recorded_ = static_cast<bool>(load_counts);
    load_fresh_ = false;
}

int64_t RoutingState::capacity(const Workspace& ws) const {
    if (!train_step_ || !ws.training) return -1;
    // The capacity of the micro-batch: every rank has N tokens (MODEL.md 2).
    return moe_capacity_rows(*cfg_.moe, ws.N * (over_ranks_ ? parallel_.data_ranks() : 1));
}

MoeRouting RoutingState::layer_routing(const Workspace& ws, int l) const {
    MoeRouting r;
    const int64_t E = cfg_.moe->n_experts;
    if (expert_bias) r.bias = expert_bias.view(row(l) * E, {E});
    if (train_step_ && ws.training && step_counts)
        r.step_counts = step_counts.view(row(l) * E, {E});
    r.capacity = capacity(ws);
    r.offsets = ws.layers[static_cast<size_t>(l)].moe.offsets;
    if (over_ranks_) r.counts = load_counts.view(row(l) * E, {E});  // the loads of the global batch
    return r;
}

void RoutingState::record_load(const Workspace& ws, int l) {
    if (row(l) < 0) return;
    const int64_t E = cfg_.moe->n_experts;
    const MoeActs& a = ws.layers[static_cast<size_t>(l)].moe;
    const bool dropped = capacity(ws) >= 0;
    if (kept_counts) dev_.copy(kept_counts.view(row(l) * E, {E}), a.counts);
    if (over_ranks_) {  // the pass wrote the global loads already; the admitted rows are summed
                        // here
        if (kept_counts) parallel_.sum_over_ranks(dev_, kept_counts.view(row(l) * E, {E}));
        return;
    }
    dev_.copy(load_counts.view(row(l) * E, {E}), dropped ? a.chosen : a.counts);
}

const std::vector<ExpertLoad>& RoutingState::expert_load() {
    if (!load_recorded_ || load_fresh_) return load_;
    const int64_t E = cfg_.moe->n_experts;
    const size_t n = static_cast<size_t>(load_counts.numel());
    std::vector<int32_t> all(n), kept;
    std::vector<float> bias;
    dev_.download(all.data(), load_counts);
    if (kept_counts) {
        kept.resize(n);
        dev_.download(kept.data(), kept_counts);
    }
    if (expert_bias) {
        bias.resize(n);
        dev_.download(bias.data(), expert_bias);
    }
    load_.clear();
    for (int l = 0; l < cfg_.n_layers; ++l) {
        if (row(l) < 0) continue;
        const size_t first = static_cast<size_t>(row(l) * E), last = first + static_cast<size_t>(E);
        ExpertLoad el{l, std::vector<int32_t>(all.begin() + first, all.begin() + last)};
        for (size_t i = first; i < last && !kept.empty(); ++i) el.dropped += all[i] - kept[i];
        if (!bias.empty()) {
            el.bias_min = *std::min_element(bias.begin() + first, bias.begin() + last);
            el.bias_max = *std::max_element(bias.begin() + first, bias.begin() + last);
        }
        load_.push_back(el);
    }
    load_fresh_ = true;
    return load_;
}

}  // namespace moetrain
