// ModelImpl (model_impl.h): the pieces of a Model and the settings that reach several of them.
#include "model/model_impl.h"

#include <utility>

#include "model/expert_shard.h"

namespace moetrain {

ModelImpl::ModelImpl(Device& device, const ModelConfig& config)
    : dev(device),
      cfg(config),
      parallel(cfg),
      store(device, cfg),
      routing(device, cfg, parallel),
      workspaces(device, cfg, store),
      passes(device, cfg, parallel, store, routing, workspaces) {}

void ModelImpl::set_precision(Precision p) {
    if (p != store.precision) workspaces.drop_training();
    store.set_precision(p);
}

void ModelImpl::set_expert_shard(const ExpertShard& to) {
    const ExpertShard from = store.shard;
    if (to == from) return;
    auto* group = parallel.expert_group();
    MT_CHECK(group, "this model holds expert block ", from.index, " of ", from.parts,
             " and has no expert-parallel group (its Trainer is gone)");
    const int rank = group->rank(), size = group->size();
    MT_CHECK((to.whole() || from.whole()) && (to.whole() || (to.parts == size && to.index == rank)),
             "expert block ", to.index, " of ", to.parts, " is not this rank's");
    std::vector<ParamInfo> next = build_param_layout(cfg, to);
    Tensor moved = dev.alloc(DType::f32, {layout_numel(next)});
    if (to.whole())
        shard_to_whole(dev, *group, shard_runs(store.layout, next), store.params, moved);
    else
        whole_to_shard(dev, to.index, shard_runs(next, store.layout), store.params, moved);
    store.adopt_shard(to, std::move(next), std::move(moved));
}

}  // namespace moetrain
