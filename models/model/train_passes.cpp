// TrainPasses: the Trainer's view of ModelImpl (train_passes.h).
#include "model/train_passes.h"

#include <algorithm>
#include <string>
#include <utility>

#include "model/model_access.h"
#include "model/model_impl.h"

namespace moetrain {

TrainPasses::TrainPasses(Model& model) : im_(ModelAccess::impl(model)) {}

int64_t TrainPasses::n_params() const {
    return im_.store.n_params;
}
int64_t TrainPasses::n_decay() const {
    return im_.store.n_decay;
}
Tensor TrainPasses::params() const {
    return im_.store.params;
}
Tensor TrainPasses::grads() const {
    return im_.store.grads;
}
Tensor TrainPasses::stats() const {
    return im_.passes.stats;
}
void TrainPasses::reset_stats() {
    im_.passes.reset_stats();
}

int64_t TrainPasses::queue_micro_batch(const int32_t* x, const int32_t* y, int B, int T,
                                       float grad_scale, float weight) {
    return im_.passes.queue_micro_batch(x, y, B, T, grad_scale, weight, true, true);
}

std::array<float, 4> TrainPasses::read_stats() {
    return im_.passes.read_stats();
}
LossStats TrainPasses::loss(const std::array<float, 4>& stats, int64_t tokens) {
    return loss_from_stats(stats, tokens);
}
StepRun TrainPasses::last_run() const {
    return im_.passes.last_run;
}
void TrainPasses::params_changed() {
    im_.store.params_changed();
}
void TrainPasses::begin_step_counts() {
    im_.routing.begin_step_counts();
}
void TrainPasses::update_expert_bias() {
    im_.routing.update_expert_bias();
}
void TrainPasses::set_data_parallel(Communicator* comm) {
    im_.parallel.set_data_parallel(comm);
}
void TrainPasses::set_expert_parallel(Communicator* group, bool overlap) {
    im_.set_expert_shard({});  // from the whole layout (a no-op the first time)
    im_.parallel.set_expert_parallel(group, overlap);
    if (group) im_.set_expert_shard({group->size(), group->rank()});
}
void TrainPasses::set_whole_experts(bool whole) {
    auto* group = im_.parallel.expert_group();
    MT_CHECK(group, "the model is not expert-parallel");
    im_.set_expert_shard(whole ? ExpertShard{} : ExpertShard{group->size(), group->rank()});
}
std::string TrainPasses::token_exchange() const {
    return im_.parallel.token_exchange();
}
void TrainPasses::drop_expert_group() {
    im_.parallel.set_expert_parallel(nullptr, false);
}
const std::vector<ParamInfo>& TrainPasses::layout() const {
    return im_.store.layout;
}

void TrainPasses::set_layer_grads_ready(std::function<void(int layer)> f) {
    im_.passes.layer_grads_ready = std::move(f);
}

std::vector<TrainPasses::Range> TrainPasses::layer_ranges(int layer) const {
    std::vector<Range> out;
    for (const ParamInfo& p : im_.store.layout) {  // in offset order
        int owner = -1;
        if (p.name.rfind("layers.", 0) == 0) owner = std::stoi(p.name.substr(7));
        if (owner != layer) continue;
        out.push_back({p.offset, p.numel()});
    }
    std::sort(out.begin(), out.end(),
              [](const Range& a, const Range& b) { return a.first < b.first; });
    std::vector<Range> merged;
    for (const Range& r : out) {
        if (!merged.empty() && merged.back().first + merged.back().count == r.first)
            merged.back().count += r.count;
        else
            merged.push_back(r);
    }
    return merged;
}

std::vector<TrainPasses::ExpertTensor> TrainPasses::expert_tensors() const {
    std::vector<ExpertTensor> out;
    for (const LayerW& l : im_.store.w.layers) {
        if (!l.moe) continue;
        for (const Tensor* t : {&l.experts.w_gate, &l.experts.w_up, &l.experts.w_down})
            if (*t) out.push_back({t->offset, t->numel() / l.experts.G, l.experts.G});
    }
    return out;
}

}  // namespace moetrain
