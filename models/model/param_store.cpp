// ParamStore (param_store.h): the flat buffers, their views and the 16-bit working copy.
#include "model/param_store.h"

#include <algorithm>
#include <utility>

#include "model/workspace.h"  // next_buffer_generation

namespace moetrain {
ParamStore::ParamStore(Device& dev, const ModelConfig& cfg) : dev_(dev), cfg_(cfg) {
    std::vector<ParamInfo> all = build_param_layout(cfg);
    const int64_t n = layout_numel(all);
    adopt_layout(std::move(all), dev_.alloc(DType::f32, {n}));
}

void ParamStore::adopt_layout(std::vector<ParamInfo> next, Tensor values) {
    layout = std::move(next);
    index.clear();
    for (size_t i = 0; i < layout.size(); ++i) index[layout[i].name] = i;
    n_params = layout_numel(layout);
    n_decay = decayed_numel(layout);
    params = std::move(values);
    grads = dev_.alloc(DType::f32, {n_params});
    w = bind_params(cfg_, layout, params);
    gw = bind_params(cfg_, layout, grads);
    wf = w;
}

void ParamStore::adopt_shard(const ExpertShard& to, std::vector<ParamInfo> next, Tensor moved) {
    w = gw = wf = ModelW{};  // the old buffers are freed before the new ones exist
    params = grads = params_lo = Tensor{};
    adopt_layout(std::move(next), std::move(moved));
    shard = to;
    set_precision(precision);  // recorded steps go stale; a 16-bit copy of this buffer
    params_changed();
}

void ParamStore::set_precision(Precision p) {
    precision = p;
    renew_generation();  // steps recorded with the old weights go stale
    if (p == Precision::fp32) {
        params_lo = Tensor{};
        wf = w;
        return;
    }
    params_lo = dev_.alloc(compute_dtype(p), {std::max<int64_t>(n_decay, 1)});
    wf = with_compute_matrices(w, params_lo);
    lo_version = params_version - 1;  // stale: converted before the next forward
}

void ParamStore::renew_generation() {
    lo_generation = next_buffer_generation();
}

void ParamStore::refresh_compute_weights() {
    if (precision == Precision::fp32 || lo_version == params_version) return;
    if (n_decay > 0) dev_.convert(params_lo.view(0, {n_decay}), params.view(0, {n_decay}));
    lo_version = params_version;
}

}  // namespace moetrain
