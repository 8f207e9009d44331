// The passes of the MODEL.md transformer over its layers: batch upload and validation,
// embedding -> L x (attention, FFN/MoE) -> head, and the backward in reverse order, which
// first re-runs the part of a layer's forward its workspace dropped (Recompute block / ffn).
// The layer math lives in the per-layer files (layers.h).
#include "model/model_impl.h"

#include <algorithm>
#include <bit>
#include <sstream>
#include <utility>

#include "model/expert_shard.h"

namespace moetrain {
namespace {

bool same_view(const Tensor& a, const Tensor& b) {
    return a.buf == b.buf && a.offset == b.offset;
}

int64_t numel_of(const std::vector<ParamInfo>& layout) {
    int64_t n = 0;
    for (const ParamInfo& p : layout) n += p.numel();
    return n;
}

}  // namespace

LossStats loss_from_stats(const std::array<float, 4>& s, int64_t tokens) {
    LossStats r;
    r.ce = s[0];
    r.aux = s[1];
    r.z = s[2];
    r.loss = r.ce + r.aux + r.z;
    r.tokens = tokens;
    return r;
}

ModelImpl::ModelImpl(Device& device, const ModelConfig& config)
    : dev(device), cfg(config), parallel(cfg) {
    std::vector<ParamInfo> all = build_param_layout(config);
    const int64_t n = numel_of(all);
    adopt_layout(std::move(all), dev.alloc(DType::f32, {n}));
    stats = dev.alloc(DType::f32, {4});
    micro = dev.alloc(DType::f32, {3});
    int moe_layers = 0;
    for (int l = 0; l < cfg.n_layers; ++l)
        moe_row_.push_back(cfg.is_moe_layer(l) ? moe_layers++ : -1);
    if (moe_layers == 0) return;
    const MoeConfig& m = *cfg.moe;
    const int64_t E = m.n_experts;
    load_counts = dev.alloc(DType::i32, {moe_layers, E});
    if (m.capacity_factor > 0) kept_counts = dev.alloc(DType::i32, {moe_layers, E});
    if (!m.has_expert_bias()) return;
    expert_bias = dev.alloc(DType::f32, {moe_layers, E});  // starts at 0 (MODEL.md 2)
    step_counts = dev.alloc(DType::i32, {moe_layers, E});
    for (int l = 0; l < cfg.n_layers; ++l) {
        const int row = moe_row_[static_cast<size_t>(l)];
        if (row < 0) continue;
        ParamInfo b;
        b.name = "layers." + std::to_string(l) + ".moe.router.expert_bias";
        b.shape = {E};
        b.offset = row * E;
        buffer_layout.push_back(b);
    }
}

void ModelImpl::adopt_layout(std::vector<ParamInfo> next, Tensor values) {
    layout = std::move(next);
    index.clear();
    for (size_t i = 0; i < layout.size(); ++i) index[layout[i].name] = i;
    n_params = numel_of(layout);
    n_decay = decayed_numel(layout);
    params = std::move(values);
    grads = dev.alloc(DType::f32, {n_params});
    w = bind_params(cfg, layout, params);
    gw = bind_params(cfg, layout, grads);
    wf = w;
}

void ModelImpl::set_expert_shard(const ExpertShard& to) {
    if (to == shard) return;
    auto* group = parallel.expert_group();
    MT_CHECK(group, "this model holds expert block ", shard.index, " of ", shard.parts,
             " and has no expert-parallel group (its Trainer is gone)");
    MT_CHECK((to.whole() || shard.whole()) &&
                 (to.whole() || (to.parts == group->size() && to.index == group->rank())),
             "expert block ", to.index, " of ", to.parts, " is not this rank's");
    std::vector<ParamInfo> next = build_param_layout(cfg, to);
    Tensor moved = dev.alloc(DType::f32, {numel_of(next)});
    if (to.whole())
        shard_to_whole(dev, *group, shard_runs(layout, next), params, moved);
    else
        whole_to_shard(dev, to.index, shard_runs(next, layout), params, moved);
    w = gw = wf = ModelW{};  // the old buffers are freed before the new ones exist
    params = grads = params_lo = Tensor{};
    adopt_layout(std::move(next), std::move(moved));
    shard = to;
    set_precision(precision);  // recorded steps go stale; a 16-bit copy of this buffer
    params_changed();
}

void ModelImpl::begin_step_counts() {
    if (step_counts) dev.fill(step_counts, 0.0f);
}

void ModelImpl::update_expert_bias() {
    if (!expert_bias) return;
    const int64_t E = cfg.moe->n_experts;
    for (const ParamInfo& b : buffer_layout)
        dev.expert_bias_update(expert_bias.view(b.offset, {E}), step_counts.view(b.offset, {E}), E,
                               cfg.moe->bias_update_rate);
}

int64_t ModelImpl::moe_capacity(const Workspace& ws) const {
    if (!train_step_ || !ws.training) return -1;
    // The capacity of the micro-batch: every rank has N tokens (MODEL.md 2).
    return moe_capacity_rows(*cfg.moe, ws.N * (dp_pass_ ? parallel.data_ranks() : 1));
}

MoePass ModelImpl::moe_pass(const Workspace& ws, int l, std::vector<int32_t>* record) {
    const int row = moe_row_[static_cast<size_t>(l)];
    const int64_t E = cfg.moe->n_experts;
    TokenDispatcher& dispatcher = parallel.dispatcher(
        dev, ws.generation, ws.N, ws.layers[static_cast<size_t>(l)].moe.xg.dtype,
        static_cast<int>(load_counts.shape[0]));
    MoePass p;
    p.layer = l;
    p.moe_layer = row;
    p.N = ws.N;
    p.ids = ws.ids;
    p.stats = &parallel.routing_stats(dp_pass_);
    p.dispatcher = &dispatcher;
    p.record = record;
    MoeRouting& r = p.route;
    if (expert_bias) r.bias = expert_bias.view(row * E, {E});
    if (train_step_ && ws.training && step_counts) r.step_counts = step_counts.view(row * E, {E});
    r.capacity = moe_capacity(ws);
    r.offsets = ws.layers[static_cast<size_t>(l)].moe.offsets;
    if (dp_pass_) r.counts = load_counts.view(row * E, {E});  // the loads of the global batch
    return p;
}

void ModelImpl::set_precision(Precision p) {
    if (p != precision) drop_training_workspaces();  // their 16-bit activations change dtype
    precision = p;
    lo_generation = next_buffer_generation();  // steps recorded with the old weights go stale
    if (p == Precision::fp32) {
        params_lo = Tensor{};
        wf = w;
        return;
    }
    params_lo = dev.alloc(compute_dtype(p), {std::max<int64_t>(n_decay, 1)});
    wf = with_compute_matrices(w, params_lo);
    lo_version = params_version - 1;  // stale: converted before the next forward
}

void ModelImpl::refresh_compute_weights() {
    if (precision == Precision::fp32 || lo_version == params_version) return;
    if (n_decay > 0) dev.convert(params_lo.view(0, {n_decay}), params.view(0, {n_decay}));
    lo_version = params_version;
}

Workspace& ModelImpl::workspace(int B, int T, bool training) {
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
    const DType stored16 = activations16_ ? compute_dtype(precision) : DType::f32;
    slot = plan_workspace(dev, cfg, B, T, training, logit_budget, recompute_, stored16);
    return *slot;
}

void ModelImpl::set_recompute(Recompute r) {
    if (r == recompute_) return;
    recompute_ = r;
    drop_training_workspaces();
}

void ModelImpl::set_activations16(bool on) {
    if (on == activations16_) return;
    activations16_ = on;
    drop_training_workspaces();
}

void ModelImpl::set_attention16(bool on) {
    attention16_ = on;
    lo_generation = next_buffer_generation();  // steps recorded with the other kernels go stale
}

DType ModelImpl::attention_compute() const {
    return attention16_ ? compute_dtype(precision) : DType::f32;
}

void ModelImpl::drop_training_workspaces() {
    std::erase_if(workspaces_, [](const auto& kv) { return std::get<2>(kv.first); });
}

std::array<float, 4> ModelImpl::read_stats() {
    std::array<float, 4> s{};
    dev.download(s.data(), stats);
    return s;
}

int64_t ModelImpl::load_batch(Workspace& ws, const int32_t* x, const int32_t* y, int64_t pos0) {
    const int64_t N = ws.N, T = ws.T, V = cfg.vocab_size;
    MT_CHECK(x, "no input tokens given");
    for (int64_t i = 0; i < N; ++i)
        MT_CHECK(x[i] >= 0 && x[i] < V, "token id ", x[i], " at position ", i, " (row ", i / T,
                 ", t ", i % T, ") is outside the vocabulary [0, ", V, ")");
    dev.upload(ws.ids, x);
    int64_t counted = 0;
    if (y) {
        for (int64_t i = 0; i < N; ++i) {
            MT_CHECK(y[i] == -1 || (y[i] >= 0 && y[i] < V), "target id ", y[i], " at position ", i,
                     " (row ", i / T, ", t ", i % T, ") is outside the vocabulary [0, ", V,
                     ") and is not -1");
            counted += y[i] != -1;
        }
        dev.upload(ws.targets, y);
    }
    if (cfg.pos == PosKind::learned) {
        std::vector<int32_t> pos(static_cast<size_t>(N));
        for (int64_t i = 0; i < N; ++i)
            pos[static_cast<size_t>(i)] = static_cast<int32_t>(pos0 + i % T);
        dev.upload(ws.pos_ids, pos.data());
    }
    return counted;
}

void ModelImpl::run_step(const std::string& key, const Workspace& ws,
                         const std::function<void()>& queue) {
    // The routing record downloads the choices, and data-parallel and expert-parallel passes
    // run collectives between the ops (staged through the host on mpi): never captured.
    if (record_routing || dp_pass_ || parallel.expert_parallel()) {
        queue();
        last_run = StepRun::eager;
        return;
    }
    std::ostringstream k;
    k << key << " ws#" << ws.generation << " lo#" << lo_generation;
    last_run = dev.run_recorded(k.str(), queue);
}

void ModelImpl::forward_layers(Workspace& ws, const std::vector<KvSlot>* cache) {
    const int L = cfg.n_layers;
    embedding_fwd(dev, wf, ws, L > 0 ? ws.layers[0].x_in : ws.x_final);
    for (int l = 0; l < L; ++l) {
        const LayerActs& a = ws.layers[static_cast<size_t>(l)];
        attention_part(ws, l, cache ? &(*cache)[static_cast<size_t>(l)] : nullptr);
        const Tensor& x_out = l + 1 < L ? ws.layers[static_cast<size_t>(l) + 1].x_in : ws.x_final;
        if (!same_view(x_out, a.x_mid)) dev.copy(x_out, a.x_mid);
        ffn_part(ws, l, x_out, micro.view(1, {2}), record_routing);
        record_load(ws, l);
    }
}

void ModelImpl::attention_part(Workspace& ws, int l, const KvSlot* cache) {
    const LayerActs& a = ws.layers[static_cast<size_t>(l)];
    const LayerW& lw = wf.layers[static_cast<size_t>(l)];
    norm_fwd(dev, cfg, lw.attn_norm, a.x_in, a.n1, ws.N);
    if (!same_view(a.x_mid, a.x_in)) dev.copy(a.x_mid, a.x_in);
    attention_fwd(dev, cfg, lw.attn, a.n1.y, a.attn, a.x_mid, ws.B, ws.T, cache,
                  attention_compute());
    norm_fwd(dev, cfg, lw.ffn_norm, a.x_mid, a.n2, ws.N);
}

void ModelImpl::ffn_part(Workspace& ws, int l, const Tensor& x_out, const Tensor& aux_stats,
                         std::vector<int32_t>* routing) {
    LayerActs& a = ws.layers[static_cast<size_t>(l)];
    const LayerW& lw = wf.layers[static_cast<size_t>(l)];
    if (lw.moe) {
        // The gather of the expert rows reads f32: a 16-bit n2.y (hash routing) is widened
        // into its transient, exactly (the products round the gathered rows to it anyway).
        if (a.n2.y32) dev.convert(a.n2.y32.view(0, {ws.N, cfg.d_model}), a.n2.y);
        const Tensor& xn = a.n2.y32 ? a.n2.y32 : a.n2.y;
        // The recompute (no aux_stats) needs no global statistics, but the expert-parallel
        // dispatch of the rows.
        moe_fwd(dev, cfg, lw, xn, a.moe, x_out, aux_stats, moe_pass(ws, l, routing));
    } else
        ffn_fwd(dev, cfg.ffn, lw.ffn, FfnRows::dense(ws.N), a.n2.y, a.ffn, x_out, 1.0f);
}

void ModelImpl::recompute_layer(Workspace& ws, int l) {
    // The same deterministic ops on the same inputs as the forward: bit-identical activations.
    // The residual stream, the loss terms, the routing record and the expert loads (recorded
    // by the forward) are left alone.
    if (ws.recompute == Recompute::block) attention_part(ws, l, nullptr);
    ffn_part(ws, l, Tensor{}, Tensor{}, nullptr);
}

void ModelImpl::backward_layers(Workspace& ws, float grad_scale) {
    const int64_t N = ws.N;
    const GradScratch& g = ws.g;  // g.dres holds d loss / d x_final (from the head)
    for (int l = cfg.n_layers - 1; l >= 0; --l) {
        if (ws.recomputes(l, cfg.n_layers)) recompute_layer(ws, l);
        const LayerActs& a = ws.layers[static_cast<size_t>(l)];
        const LayerW& lw = wf.layers[static_cast<size_t>(l)];
        const LayerW& glw = gw.layers[static_cast<size_t>(l)];
        if (lw.moe)
            moe_bwd(dev, cfg, lw, glw, a.n2.y, a.moe, g.dres, g, g.dxn, grad_scale,
                    moe_pass(ws, l, nullptr));
        else
            ffn_bwd(dev, cfg.ffn, lw.ffn, glw.ffn, FfnRows::dense(N), a.n2.y, a.ffn, g.dres, g,
                    g.dxn, false);
        norm_bwd(dev, cfg, lw.ffn_norm, glw.ffn_norm, g.dxn, a.x_mid, a.n2, g.dres, N, true);
        attention_bwd(dev, cfg, lw.attn, glw.attn, a.n1.y, a.attn, g.dres, g, g.dxn, ws.B, ws.T,
                      attention_compute());
        norm_bwd(dev, cfg, lw.attn_norm, glw.attn_norm, g.dxn, a.x_in, a.n1, g.dres, N, true);
        if (layer_grads_ready) layer_grads_ready(l);
    }
    embedding_bwd(dev, gw, ws, g.dres);
}

void ModelImpl::record_load(const Workspace& ws, int l) {
    const int row = moe_row_[static_cast<size_t>(l)];
    if (row < 0) return;
    const int64_t E = cfg.moe->n_experts;
    const MoeActs& a = ws.layers[static_cast<size_t>(l)].moe;
    const bool dropped = moe_capacity(ws) >= 0;
    if (kept_counts) dev.copy(kept_counts.view(row * E, {E}), a.counts);
    if (dp_pass_) {  // the pass wrote the global loads already; the admitted rows are summed here
        if (kept_counts) parallel.sum_over_ranks(dev, kept_counts.view(row * E, {E}));
        return;
    }
    dev.copy(load_counts.view(row * E, {E}), dropped ? a.chosen : a.counts);
}

void ModelImpl::loads_written() {
    load_recorded_ = static_cast<bool>(load_counts);
    load_fresh_ = false;
}

const std::vector<ExpertLoad>& ModelImpl::expert_load() {
    if (!load_recorded_ || load_fresh_) return load_;
    const int64_t E = cfg.moe->n_experts;
    const size_t n = static_cast<size_t>(load_counts.numel());
    std::vector<int32_t> all(n), kept;
    std::vector<float> bias;
    dev.download(all.data(), load_counts);
    if (kept_counts) {
        kept.resize(n);
        dev.download(kept.data(), kept_counts);
    }
    if (expert_bias) {
        bias.resize(n);
        dev.download(bias.data(), expert_bias);
    }
    load_.clear();
    for (int l = 0; l < cfg.n_layers; ++l) {
        const int row = moe_row_[static_cast<size_t>(l)];
        if (row < 0) continue;
        const size_t first = static_cast<size_t>(row * E), last = first + static_cast<size_t>(E);
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

int64_t ModelImpl::queue_micro_batch(const int32_t* x, const int32_t* y, int B, int T,
                                     float grad_scale, float weight, bool backward,
                                     bool train_step) {
    MT_CHECK(B >= 1 && T >= 1, "batch shape B=", B, " T=", T, " must be positive");
    MT_CHECK(T <= cfg.max_seq_len, "sequence length T=", T, " exceeds max_seq_len ",
             cfg.max_seq_len);
    MT_CHECK(y, "no target tokens given");
    MT_CHECK(!backward || grad_scale != 0.0f, "grad_scale must be nonzero for a backward pass");
    Workspace& ws = workspace(B, T, backward);
    int64_t counted = load_batch(ws, x, y, 0);
    refresh_compute_weights();
    dp_pass_ = backward && parallel.data_parallel();
    train_step_ = backward && train_step;
    // The cross-entropy is the mean over the global micro-batch's targets.
    if (dp_pass_) counted = parallel.sum_over_ranks(counted);
    const float ce_scale = 1.0f / static_cast<float>(std::max<int64_t>(counted, 1));
    // Only device work below, the same for the same key (buffers and every scalar argument).
    auto queue = [&] {
        dev.fill(micro, 0.0f);
        forward_layers(ws, nullptr);
        head_fwd(dev, cfg, wf, backward ? &gw : nullptr, ws, ce_scale, grad_scale * ce_scale,
                 micro.view(0, {1}));
        if (backward) backward_layers(ws, grad_scale);
        dev.axpby(stats.view(0, {3}), weight, micro, 1.0f, 3);
    };
    auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
    std::ostringstream key;  // the buffers are the workspace's, the model's and stats / micro
    key << (backward ? "train" : "eval") << " B" << B << " T" << T << std::hex
        << " gs=" << bits(grad_scale) << " w=" << bits(weight) << " ce=" << bits(ce_scale)
        << (train_step_ ? " step" : "");
    run_step(key.str(), ws, queue);
    dp_pass_ = false;
    train_step_ = false;
    loads_written();
    return counted;
}

void ModelImpl::forward_cached(const int32_t* x, int B, int T, int64_t pos0,
                               const std::vector<KvSlot>& cache, const Tensor& logits) {
    MT_CHECK(B >= 1 && T >= 1, "batch shape B=", B, " T=", T, " must be positive");
    MT_CHECK(pos0 + T <= cfg.max_seq_len, "positions up to ", pos0 + T, " exceed max_seq_len ",
             cfg.max_seq_len);
    Workspace& ws = workspace(B, T, false);
    load_batch(ws, x, nullptr, pos0);
    refresh_compute_weights();
    forward_layers(ws, &cache);
    loads_written();
    head_last_logits(dev, cfg, wf, ws, logits);
    last_run = StepRun::eager;
}

void ModelImpl::decode_step(const int32_t* x, int B, int64_t pos, const std::vector<KvSlot>& cache,
                            const Tensor& logits, const std::string& key,
                            const std::function<void()>& then) {
    MT_CHECK(B >= 1, "batch size B=", B, " must be positive");
    MT_CHECK(pos >= 0 && pos < cfg.max_seq_len, "decode position ", pos, " outside [0, ",
             cfg.max_seq_len, ")");
    Workspace& ws = workspace(B, 1, false);
    load_batch(ws, x, nullptr, pos);
    refresh_compute_weights();
    // Only device work below, the same at every position (the slots read it on the device).
    auto queue = [&] {
        forward_layers(ws, &cache);
        head_last_logits(dev, cfg, wf, ws, logits);
        then();
    };
    run_step(key, ws, queue);
    loads_written();
}

std::vector<float> ModelImpl::forward_all_logits(const int32_t* x, int B, int T) {
    MT_CHECK(B >= 1 && T >= 1, "batch shape B=", B, " T=", T, " must be positive");
    MT_CHECK(T <= cfg.max_seq_len, "sequence length T=", T, " exceeds max_seq_len ",
             cfg.max_seq_len);
    Workspace& ws = workspace(B, T, false);
    load_batch(ws, x, nullptr, 0);
    refresh_compute_weights();
    dev.fill(micro, 0.0f);
    forward_layers(ws, nullptr);
    loads_written();
    return head_logits(dev, cfg, wf, ws);
}

LossStats ModelImpl::loss_f64(const int32_t* x, const int32_t* y, int B, int T) {
    reset_stats();
    const int64_t counted = queue_micro_batch(x, y, B, T, 0.0f, 1.0f, false);
    Workspace& ws = workspace(B, T, false);
    std::vector<float> losses(static_cast<size_t>(ws.N));
    dev.download(losses.data(), ws.losses);
    const std::array<float, 4> s = read_stats();
    LossStats r;
    for (float v : losses) r.ce += v;
    r.ce /= static_cast<double>(std::max<int64_t>(counted, 1));
    r.aux = s[1];
    r.z = s[2];
    r.loss = r.ce + r.aux + r.z;
    r.tokens = counted;
    return r;
}

}  // namespace moetrain
