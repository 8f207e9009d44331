// The analytic memory a training step needs (for `moetrain bench`, next to the measured peak
// RSS): parameters, gradients, the two AdamW moments, and the activations the backward pass
// reads (MODEL.md transformer, float32) as the recompute mode keeps them (none: every layer's;
// block: every layer's input plus one layer's buffers; ffn: every layer's attention part plus
// one set of FFN / MoE buffers). Transient buffers (logit chunks, backward scratch) are not
// counted: they are what the measured RSS may exceed the analytic need by.
#pragma once

#include <cstdint>

#include "moetrain/config.h"
#include "moetrain/model.h"

namespace moetrain::cli {

struct MemoryNeed {
    double weights = 0, grads = 0, moments = 0, activations = 0;  // bytes
    double total() const { return weights + grads + moments + activations; }
};

// Training with AdamW on a batch of B sequences of T tokens; `params` = total parameters.
MemoryNeed training_memory(const ModelConfig& c, int64_t params, int64_t B, int64_t T,
                           Recompute recompute = Recompute::none);

// Bytes of weights one batch-1 decode step reads: every matrix of the active path (attention,
// router, the top-k routed and the shared experts, the output head) plus the norm gains and
// one embedding row.
double decode_weight_bytes(const ModelConfig& c, int64_t active_matmul_params);

}  // namespace moetrain::cli
