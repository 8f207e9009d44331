// ModelPasses (model_passes.h): the entry points of the passes (batch upload and validation,
// the training micro-batch, the forward over all logits, prefill and decode) and how their
// device work runs (recorded or eager).
#include "model/model_passes.h"

#include <algorithm>
#include <bit>
#include <sstream>

namespace moetrain {

LossStats loss_from_stats(const std::array<float, 4>& s, int64_t tokens) {
    LossStats r;
    r.ce = s[0];
    r.aux = s[1];
    r.z = s[2];
    r.loss = r.ce + r.aux + r.z;
    r.tokens = tokens;
    return r;
}

ModelPasses::ModelPasses(Device& dev, const ModelConfig& cfg, ParallelContext& parallel,
                         ParamStore& store, RoutingState& routing, WorkspaceCache& workspaces)
    : dev_(dev),
      cfg_(cfg),
      parallel_(parallel),
      store_(store),
      routing_(routing),
      workspaces_(workspaces) {
    stats = dev.alloc(DType::f32, {4});
    micro = dev.alloc(DType::f32, {3});
}

void ModelPasses::set_attention16(bool on) {
    attention16_ = on;
    store_.renew_generation();  // steps recorded with the other kernels go stale
}

DType ModelPasses::attention_compute() const {
    return attention16_ ? compute_dtype(store_.precision) : DType::f32;
}

std::array<float, 4> ModelPasses::read_stats() {
    std::array<float, 4> s{};
    dev_.download(s.data(), stats);
    return s;
}

int64_t ModelPasses::load_batch(Workspace& ws, const int32_t* x, const int32_t* y, int64_t pos0) {
    const int64_t N = ws.N, T = ws.T, V = cfg_.vocab_size;
    MT_CHECK(x, "no input tokens given");
    for (int64_t i = 0; i < N; ++i)
        MT_CHECK(x[i] >= 0 && x[i] < V, "token id ", x[i], " at position ", i, " (row ", i / T,
                 ", t ", i % T, ") is outside the vocabulary [0, ", V, ")");
    dev_.upload(ws.ids, x);
    int64_t counted = 0;
    if (y) {
        for (int64_t i = 0; i < N; ++i) {
            MT_CHECK(y[i] == -1 || (y[i] >= 0 && y[i] < V), "target id ", y[i], " at position ", i,
                     " (row ", i / T, ", t ", i % T, ") is outside the vocabulary [0, ", V,
                     ") and is not -1");
            counted += y[i] != -1;
        }
        dev_.upload(ws.targets, y);
    }
    if (cfg_.pos == PosKind::learned) {
        std::vector<int32_t> pos(static_cast<size_t>(N));
        for (int64_t i = 0; i < N; ++i)
            pos[static_cast<size_t>(i)] = static_cast<int32_t>(pos0 + i % T);
        dev_.upload(ws.pos_ids, pos.data());
    }
    return counted;
}

void ModelPasses::run_step(const std::string& key, const Workspace& ws,
                           const std::function<void()>& queue) {
    // The routing record downloads the choices, and data-parallel and expert-parallel passes
    // run collectives between the ops (staged through the host on mpi): never captured.
    if (record_routing || routing_.over_ranks() || parallel_.expert_parallel()) {
        queue();
        last_run = StepRun::eager;
        return;
    }
    std::ostringstream k;
    k << key << " ws#" << ws.generation << " lo#" << store_.lo_generation;
    last_run = dev_.run_recorded(k.str(), queue);
}

int64_t ModelPasses::queue_micro_batch(const int32_t* x, const int32_t* y, int B, int T,
                                       float grad_scale, float weight, bool backward,
                                       bool train_step) {
    MT_CHECK(B >= 1 && T >= 1, "batch shape B=", B, " T=", T, " must be positive");
    MT_CHECK(T <= cfg_.max_seq_len, "sequence length T=", T, " exceeds max_seq_len ",
             cfg_.max_seq_len);
    MT_CHECK(y, "no target tokens given");
    MT_CHECK(!backward || grad_scale != 0.0f, "grad_scale must be nonzero for a backward pass");
    Workspace& ws = workspaces_.get(B, T, backward);
    int64_t counted = load_batch(ws, x, y, 0);
    store_.refresh_compute_weights();
    const bool dp_pass = backward && parallel_.data_parallel();
    routing_.begin_pass(dp_pass, backward && train_step);
    // The cross-entropy is the mean over the global micro-batch's targets.
    if (dp_pass) counted = parallel_.sum_over_ranks(counted);
    const float ce_scale = 1.0f / static_cast<float>(std::max<int64_t>(counted, 1));
    // Only device work below, the same for the same key (buffers and every scalar argument).
    auto queue = [&] {
        dev_.fill(micro, 0.0f);
        forward_layers(ws, nullptr);
        head_fwd(dev_, cfg_, store_.wf, backward ? &store_.gw : nullptr, ws, ce_scale,
                 grad_scale * ce_scale, micro.view(0, {1}));
        if (backward) backward_layers(ws, grad_scale);
        dev_.axpby(stats.view(0, {3}), weight, micro, 1.0f, 3);
    };
    auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
    std::ostringstream key;  // the buffers are the workspace's, the model's and stats / micro
    key << (backward ? "train" : "eval") << " B" << B << " T" << T << std::hex
        << " gs=" << bits(grad_scale) << " w=" << bits(weight) << " ce=" << bits(ce_scale)
        << (backward && train_step ? " step" : "");
    run_step(key.str(), ws, queue);
    routing_.end_pass();
    return counted;
}

void ModelPasses::forward_cached(const int32_t* x, int B, int T, int64_t pos0,
                                 const std::vector<KvSlot>& cache, const Tensor& logits) {
    MT_CHECK(B >= 1 && T >= 1, "batch shape B=", B, " T=", T, " must be positive");
    MT_CHECK(pos0 + T <= cfg_.max_seq_len, "positions up to ", pos0 + T, " exceed max_seq_len ",
             cfg_.max_seq_len);
    Workspace& ws = workspaces_.get(B, T, false);
    load_batch(ws, x, nullptr, pos0);
    store_.refresh_compute_weights();
    forward_layers(ws, &cache);
    routing_.end_pass();
    head_last_logits(dev_, cfg_, store_.wf, ws, logits);
    last_run = StepRun::eager;
}

void ModelPasses::decode_step(const int32_t* x, int B, int64_t pos,
                              const std::vector<KvSlot>& cache, const Tensor& logits,
                              const std::string& key, const std::function<void()>& then) {
    MT_CHECK(B >= 1, "batch size B=", B, " must be positive");
    MT_CHECK(pos >= 0 && pos < cfg_.max_seq_len, "decode position ", pos, " outside [0, ",
             cfg_.max_seq_len, ")");
    Workspace& ws = workspaces_.get(B, 1, false);
    load_batch(ws, x, nullptr, pos);
    store_.refresh_compute_weights();
    // Only device work below, the same at every position (the slots read it on the device).
    auto queue = [&] {
        forward_layers(ws, &cache);
        head_last_logits(dev_, cfg_, store_.wf, ws, logits);
        then();
    };
    run_step(key, ws, queue);
    routing_.end_pass();
}

std::vector<float> ModelPasses::forward_all_logits(const int32_t* x, int B, int T) {
    MT_CHECK(B >= 1 && T >= 1, "batch shape B=", B, " T=", T, " must be positive");
    MT_CHECK(T <= cfg_.max_seq_len, "sequence length T=", T, " exceeds max_seq_len ",
             cfg_.max_seq_len);
    Workspace& ws = workspaces_.get(B, T, false);
    load_batch(ws, x, nullptr, 0);
    store_.refresh_compute_weights();
    dev_.fill(micro, 0.0f);
    forward_layers(ws, nullptr);
    routing_.end_pass();
    return head_logits(dev_, cfg_, store_.wf, ws);
}

LossStats ModelPasses::loss_f64(const int32_t* x, const int32_t* y, int B, int T) {
    reset_stats();
    const int64_t counted = queue_micro_batch(x, y, B, T, 0.0f, 1.0f, false);
    Workspace& ws = workspaces_.get(B, T, false);
    std::vector<float> losses(static_cast<size_t>(ws.N));
    dev_.download(losses.data(), ws.losses);
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
