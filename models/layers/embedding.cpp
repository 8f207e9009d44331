// Token embedding plus learned positions (MODEL.md 2): x = tok_emb[idx] (+ pos_emb[t]),
// and its backward (scatter-add of the residual gradient into the tables).
#include "layers/layers.h"

namespace moetrain {

void embedding_fwd(Device& dev, const ModelW& w, const Workspace& ws, const Tensor& x) {
    const int64_t D = w.tok_emb.shape[1];
    dev.embedding_fwd(x, w.tok_emb, ws.ids, ws.N, D, false);
    if (w.pos_emb) dev.embedding_fwd(x, w.pos_emb, ws.pos_ids, ws.N, D, true);
}

void embedding_bwd(Device& dev, const ModelW& gw, const Workspace& ws, const Tensor& dx) {
    const int64_t D = gw.tok_emb.shape[1];
    dev.embedding_bwd(gw.tok_emb, dx, ws.ids, ws.N, D);
    if (gw.pos_emb) dev.embedding_bwd(gw.pos_emb, dx, ws.pos_ids, ws.N, D);
}

}  // namespace moetrain
