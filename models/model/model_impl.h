// ModelImpl: the state behind moetrain::Model, composed of one piece per job: the ranks
// (ParallelContext, models/parallel/), the parameters (ParamStore: flat buffers, typed views,
// 16-bit copy), the MoE routing state (RoutingState: expert loads, expert bias), the planned
// workspaces (WorkspaceCache) and the passes over the layers (ModelPasses) that Model,
// Trainer, generate() and gradcheck() are built from. What remains here are the settings that
// reach more than one piece.
#pragma once

#include "model/model_passes.h"
#include "model/param_store.h"
#include "model/routing_state.h"
#include "model/workspace_cache.h"
#include "moetrain/model.h"
#include "moetrain/precision.h"
#include "parallel/parallel_context.h"

namespace moetrain {

class ModelImpl {
  public:
    ModelImpl(Device& device, const ModelConfig& config);
    ModelImpl(const ModelImpl&) = delete;  // the pieces hold references to cfg and each other
    ModelImpl& operator=(const ModelImpl&) = delete;

    Device& dev;
    const ModelConfig cfg;
    // Data parallel and expert parallel (set by the Trainer through TrainPasses): training
    // micro-batches of a data-parallel model are this rank's rows of the global micro-batch,
    // their target count and every MoE layer's routing statistics are over every rank, so the
    // loss terms and gradients are this rank's shares of the global ones; inference passes stay
    // local. Expert parallel, the flat buffers hold only this rank's block of experts
    // (ParamStore::shard), and every pass sends the routed rows to their experts' ranks (the
    // all-to-all dispatcher): each pass is a collective of the group.
    ParallelContext parallel;
    ParamStore store;
    RoutingState routing;
    WorkspaceCache workspaces;
    ModelPasses passes;

    // The weights' precision; a change drops the training workspaces (their 16-bit
    // activations change dtype).
    void set_precision(Precision p);
    // Re-lays the parameters out for `to` (the whole layout or this rank's block of the
    // expert-parallel group): whole -> block keeps this rank's experts, block -> whole
    // all-gathers every rank's over the group (a collective; checkpoints save and load the
    // whole layout). ParamStore::adopt_shard then takes the moved buffer.
    void set_expert_shard(const ExpertShard& to);
};

}  // namespace moetrain
