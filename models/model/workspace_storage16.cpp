// 16-bit activation storage of mixed-precision training workspaces (workspace.h): which
// activations only matrix products read, and the one f32 transient a 16-bit activation needs.
//
// The norms and activations write their 16-bit outputs themselves (rounded from the f32 value).
// The exception is a hash-routed MoE layer's 16-bit FFN-norm output: the expert-row gather
// reads f32, so the layer widens it into nf.y first (exact). nf.y is free then: only the head
// reads it, between the last layer's forward and the start of the backward, and a layer's
// forward (or its recompute inside the backward) runs outside that window.
#include "model/workspace.h"

namespace moetrain {

bool norm2_gemm_only(const ModelConfig& c, int layer) {
    return !(c.is_moe_layer(layer) && c.moe->topk_router());
}

void bind_f32_transients(Workspace& ws) {
    for (LayerActs& a : ws.layers) {
        if (!a.moe.xg || !a.n2.y || a.n2.y.dtype == DType::f32) continue;
        MT_CHECK(ws.nf.y && ws.nf.y.numel() >= a.n2.y.numel(), "16-bit norm output ",
                 a.n2.y.shape.str(), " has no f32 transient to be widened into");
        a.n2.y32 = ws.nf.y;
    }
}

}  // namespace moetrain
