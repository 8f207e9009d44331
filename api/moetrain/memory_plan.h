// The memory planner behind `moetrain plan` and `moetrain bench`: what one training
// configuration needs on a device, part by part — computed by running the real allocation
// code (Model, Trainer, the workspace planner) against a device that allocates nothing and
// counts bytes, so the plan is exact for every buffer moetrain itself allocates, and can be
// made for models far larger than this machine's memory.
#pragma once

#include <cstdint>
#include <string>

#include "moetrain/config.h"
#include "moetrain/model.h"
#include "moetrain/precision.h"
#include "moetrain/train.h"

namespace moetrain {

struct PlanOptions {
    int batch = 1, seq = 1;
    Precision precision = Precision::fp32;
    OptimizerKind optimizer = OptimizerKind::adamw;
    Recompute recompute = Recompute::none;
    int ranks = 1;             // data-parallel ranks (batch is per rank)
    int zero = 0;              // 1: ZeRO-1, the AdamW moments sharded over the ranks
    int expert_parallel = 1;   // ranks per expert-parallel group (DistOptions::expert_parallel)
    bool attention16 = false;  // --attention16: cuda's cuDNN attention scratch is counted
};

// Bytes of device memory, by part.
struct MemoryPlan {
    double weights = 0;          // what the products read: the fp32 parameters (fp32), or the
                                 // 16-bit copy of the weight matrices (bf16 / fp16)
    double master_weights = 0;   // bf16 / fp16: the fp32 parameters the optimizer updates
    double grads = 0;            // fp32 gradients of every parameter
    double optimizer = 0;        // AdamW moments (fp32 or 8-bit + block scales); SGD: 0;
                                 // with ZeRO-1 this rank's shard of them
    double zero_buffers = 0;     // ZeRO-1: the reduced gradient shard and updated parameter shard
    double expert_dispatch = 0;  // expert parallel: the rows received from the group, their
                                 // expert activations and gradients, for a balanced router
                                 // (N k rows per layer); they grow with the imbalance up to
    double expert_dispatch_max = 0;  // (not in total) every token of the group routed here
    double activations = 0;          // what the forward keeps for the backward (recompute mode)
    double workspace = 0;            // backward scratch, a logits chunk, batch ids, loss buffers,
                                     // and the backend's op scratch (op_scratch)
    double op_scratch = 0;           // part of workspace: the backend's largest op temporary, i.e.
                                     // (16-bit) GEMM operand conversion, (MoE, cuda) the grouped
                                     // expert GEMMs' pointer arrays and round buffers, (cuda)
                                     // embedding_bwd's sorted token indices and partial rows or
                                     // (cuda, attention16) cuDNN attention's 16-bit copies and
                                     // backward workspace
    double total() const {
        return weights + master_weights + grads + optimizer + zero_buffers + expert_dispatch +
               activations + workspace;
    }
};

MemoryPlan plan_training_memory(const ModelConfig& c, const PlanOptions& o);

}  // namespace moetrain
