// Feed-forward block (MODEL.md 2): swiglu / gelu / relu, for a dense FFN (one group of rows,
// optional biases: linear layers) and for MoE experts (group g = the contiguous rows routed to
// expert g: one Device::gemm_grouped per projection, the group sizes staying on the device;
// the activation runs over all rows at once).
#include "layers/layers.h"

namespace moetrain {
namespace {

// The projections of every group: the weight tensors hold the G matrices back to back.
LinearW gate_of(const FfnW& w) {
    return {w.w_gate, w.b_gate, w.F, w.D};
}
LinearW up_of(const FfnW& w) {
    return {w.w_up, w.b_up, w.F, w.D};
}
LinearW down_of(const FfnW& w) {
    return {w.w_down, w.b_down, w.D, w.F};
}

Act act_of(FfnKind kind) {
    return kind == FfnKind::gelu ? Act::gelu : Act::relu;
}

bool grouped(const FfnRows& r) {
    return static_cast<bool>(r.counts);
}

// y (=|+=) x @ W_g^T for the rows of each group g.
void project_fwd(Device& dev, const Tensor& y, const Tensor& x, const LinearW& w, const FfnRows& r,
                 float beta) {
    if (!grouped(r)) return linear_fwd(dev, y, x, w, r.rows, beta);
    MT_CHECK(!w.b, "MoE experts have no biases");
    GemmArgs g = linear_fwd_gemm(y, x, w, r.rows, beta);
    g.stride_b = w.out * w.in;
    dev.gemm_grouped(g, r.counts, r.groups, GroupDim::m);
}

// dx (=|+=) dy @ W_g and gW_g += dy^T @ x over the rows of each group g.
void project_bwd(Device& dev, const Tensor& dx, const LinearW& gw, const Tensor& dy,
                 const Tensor& x, const LinearW& w, const FfnRows& r, bool accumulate_dx,
                 const Tensor& dy16) {
    if (!grouped(r)) return linear_bwd(dev, dx, gw, dy, x, w, r.rows, accumulate_dx, dy16);
    GemmArgs g = linear_dx_gemm(dx, dy, w, r.rows, accumulate_dx);
    g.stride_b = w.out * w.in;
    dev.gemm_grouped(g, r.counts, r.groups, GroupDim::m);
    g = linear_dw_gemm(gw, dy, x, w, r.rows);
    g.stride_c = w.out * w.in;
    dev.gemm_grouped(g, r.counts, r.groups, GroupDim::k);
}

}  // namespace

void ffn_fwd(Device& dev, FfnKind kind, const FfnW& w, const FfnRows& rows, const Tensor& x,
             const FfnActs& a, const Tensor& y, float beta_y) {
    const int64_t F = w.F, R = rows.rows;
    if (R == 0) return;
    const Tensor h = a.h.view(0, {R * F});  // f32, or 16-bit: the activation op rounds it
    if (kind == FfnKind::gelu && !grouped(rows) && a.fuse_gelu) {
        // A dense GELU FFN (inference, fp32 training): the up projection's epilogue adds the
        // bias, keeps the pre-activation in a.up (the backward reads it) and writes h =
        // gelu(up). Training under 16-bit products runs act_fwd instead, which writes h in its
        // storage dtype (an epilogue's aux and output share one dtype, and a.up stays f32).
        dev.gemm_epilogue(linear_fwd_gemm(h, x, up_of(w), R, 0.0f),
                          GemmEpilogue{.bias = w.b_up, .act = EpilogueAct::gelu, .pre_act = a.up});
    } else {
        if (kind == FfnKind::swiglu) project_fwd(dev, a.gate, x, gate_of(w), rows, 0.0f);
        project_fwd(dev, a.up, x, up_of(w), rows, 0.0f);
        if (kind == FfnKind::swiglu)
            dev.swiglu_fwd(h, a.gate, a.up, R * F);
        else
            dev.act_fwd(act_of(kind), h, a.up, R * F);
    }
    if (!y) return;  // recompute for the backward: only the hidden activations are read
    project_fwd(dev, y, a.h, down_of(w), rows, beta_y);
}

void ffn_bwd(Device& dev, FfnKind kind, const FfnW& w, const FfnW& gw, const FfnRows& rows,
             const Tensor& x, const FfnActs& a, const Tensor& dy, const GradScratch& g,
             const Tensor& dx, bool accumulate_dx) {
    const int64_t F = w.F, R = rows.rows;
    if (R == 0) return;
    // The up projection's dy: g.dup (f32), or, for a dense GELU / ReLU FFN under 16-bit
    // products, the activation backward's output rounded into dy16 as it is stored, which both
    // up-projection products read (round_dy_once leaves a 16-bit dy as it is). dy16 is free by
    // then: the down projection's two products, which read it, come first.
    const bool dup16 = !grouped(rows) && kind != FfnKind::swiglu && reads_dy16(g.dy16, up_of(w));
    const Tensor dup = dup16 ? g.dy16.view(0, {R, F}) : g.dup;
    if (kind == FfnKind::gelu && !grouped(rows) && !dup16) {
        // A dense GELU FFN with fp32 products: the down projection's input gradient comes out
        // of its product already multiplied by gelu'(up) (the epilogue reads the kept
        // pre-activation).
        dev.gemm_epilogue(linear_dx_gemm(g.dup, dy, down_of(w), R, false),
                          GemmEpilogue{.act = EpilogueAct::gelu_grad, .pre_act = a.up});
        linear_bwd(dev, Tensor{}, down_of(gw), dy, a.h, down_of(w), R, false);
    } else {
        project_bwd(dev, g.dh, down_of(gw), dy, a.h, down_of(w), rows, false, g.dy16);
        if (kind == FfnKind::swiglu)
            dev.swiglu_bwd(g.dgate, g.dup, g.dh, a.gate, a.up, R * F);
        else
            dev.act_bwd(act_of(kind), dup, g.dh, a.up, R * F);
    }
    project_bwd(dev, dx, up_of(gw), dup, x, up_of(w), rows, accumulate_dx, g.dy16);
    if (kind == FfnKind::swiglu)
        project_bwd(dev, dx, gate_of(gw), g.dgate, x, gate_of(w), rows, true, g.dy16);
}

}  // namespace moetrain
