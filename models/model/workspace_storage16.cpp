// 16-bit activation storage of mixed-precision training workspaces (workspace.h): which
// activations only matrix products read, and the shared f32 buffers their values are
// computed into before the conversion to 16 bits.
//
// Why the transients are safe: a layer norm's output is written to nf.y, which only the head
// reads, between the last layer's forward and the start of the backward; every layer norm
// (forward, or the recompute of Recompute::block inside the backward) runs outside that window.
// An FFN hidden is written to g.dh, backward scratch that ffn_bwd fills and consumes within
// one call; the forward and a layer's recompute (run before that layer's backward starts)
// never overlap such a call.
#include "model/workspace.h"

namespace moetrain {
namespace {

bool is_16bit(const Tensor& t) {
    return t && t.dtype != DType::f32;
}

void bind_norm(NormActs& a, const Tensor& transient) {
    if (!is_16bit(a.y)) return;
    MT_CHECK(transient && transient.numel() >= a.y.numel(), "16-bit norm output ", a.y.shape.str(),
             " has no f32 transient to be computed in");
    a.y32 = transient;
}

void bind_ffn(FfnActs& a, const Tensor& transient) {
    if (!is_16bit(a.h)) return;
    MT_CHECK(transient && transient.numel() >= a.h.numel(), "16-bit FFN hidden ", a.h.shape.str(),
             " has no f32 transient to be computed in");
    a.h32 = transient;
}

}  // namespace

bool norm2_gemm_only(const ModelConfig& c, int layer) {
    return !(c.is_moe_layer(layer) && c.moe->topk_router());
}

void bind_f32_transients(Workspace& ws) {
    for (LayerActs& a : ws.layers) {
        bind_norm(a.n1, ws.nf.y);
        bind_norm(a.n2, ws.nf.y);
        bind_ffn(a.ffn, ws.g.dh);
        bind_ffn(a.moe.experts, ws.g.dh);
        bind_ffn(a.moe.shared, ws.g.dh);
    }
}

}  // namespace moetrain
