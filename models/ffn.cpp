// Feed-forward block (MODEL.md 2): swiglu / gelu / relu, for a dense FFN (one group of rows,
// optional biases) and for MoE experts (group g = the contiguous rows routed to expert g, one
// GEMM per expert and projection; the activation runs over all rows at once).
#include "layers.h"

namespace moetrain {
namespace {

// The row ranges of the groups, skipping empty ones.
template <typename Fn>
void for_each_group(const std::vector<int32_t>& rows_per_group, Fn&& fn) {
    int64_t r0 = 0;
    for (size_t g = 0; g < rows_per_group.size(); ++g) {
        const int64_t rows = rows_per_group[g];
        if (rows > 0) fn(static_cast<int64_t>(g), r0, rows);
        r0 += rows;
    }
}

int64_t total_rows(const std::vector<int32_t>& rows_per_group) {
    int64_t n = 0;
    for (int32_t r : rows_per_group) n += r;
    return n;
}

LinearW gate_of(const FfnW& w, int64_t g) {
    return {w.gate(g), w.b_gate, w.F, w.D};
}
LinearW up_of(const FfnW& w, int64_t g) {
    return {w.up(g), w.b_up, w.F, w.D};
}
LinearW down_of(const FfnW& w, int64_t g) {
    return {w.down(g), w.b_down, w.D, w.F};
}

Act act_of(FfnKind kind) {
    return kind == FfnKind::gelu ? Act::gelu : Act::relu;
}

}  // namespace

void ffn_fwd(Device& dev, FfnKind kind, const FfnW& w, const std::vector<int32_t>& rows_per_group,
             const Tensor& x, const FfnActs& a, const Tensor& y, float beta_y) {
    const int64_t F = w.F, D = w.D, R = total_rows(rows_per_group);
    for_each_group(rows_per_group, [&](int64_t g, int64_t r0, int64_t rows) {
        const Tensor xg = x.view(r0 * D, {rows, D});
        if (kind == FfnKind::swiglu)
            linear_fwd(dev, a.gate.view(r0 * F, {rows, F}), xg, gate_of(w, g), rows, 0.0f);
        linear_fwd(dev, a.up.view(r0 * F, {rows, F}), xg, up_of(w, g), rows, 0.0f);
    });
    if (R == 0) return;
    const Tensor h = a.h32 ? a.h32.view(0, {R * F}) : a.h;  // a 16-bit h: f32 first, converted
    if (kind == FfnKind::swiglu)
        dev.swiglu_fwd(h, a.gate, a.up, R * F);
    else
        dev.act_fwd(act_of(kind), h, a.up, R * F);
    if (a.h32) dev.convert(a.h.view(0, {R * F}), h);
    if (!y) return;  // recompute for the backward: only the hidden activations are read
    for_each_group(rows_per_group, [&](int64_t g, int64_t r0, int64_t rows) {
        linear_fwd(dev, y.view(r0 * D, {rows, D}), a.h.view(r0 * F, {rows, F}), down_of(w, g), rows,
                   beta_y);
    });
}

void ffn_bwd(Device& dev, FfnKind kind, const FfnW& w, const FfnW& gw,
             const std::vector<int32_t>& rows_per_group, const Tensor& x, const FfnActs& a,
             const Tensor& dy, const GradScratch& g, const Tensor& dx, bool accumulate_dx) {
    const int64_t F = w.F, D = w.D, R = total_rows(rows_per_group);
    if (R == 0) return;
    for_each_group(rows_per_group, [&](int64_t e, int64_t r0, int64_t rows) {
        linear_bwd(dev, g.dh.view(r0 * F, {rows, F}), down_of(gw, e), dy.view(r0 * D, {rows, D}),
                   a.h.view(r0 * F, {rows, F}), down_of(w, e), rows, false);
    });
    if (kind == FfnKind::swiglu)
        dev.swiglu_bwd(g.dgate, g.dup, g.dh, a.gate, a.up, R * F);
    else
        dev.act_bwd(act_of(kind), g.dup, g.dh, a.up, R * F);
    for_each_group(rows_per_group, [&](int64_t e, int64_t r0, int64_t rows) {
        const Tensor xg = x.view(r0 * D, {rows, D}), dxg = dx.view(r0 * D, {rows, D});
        linear_bwd(dev, dxg, up_of(gw, e), g.dup.view(r0 * F, {rows, F}), xg, up_of(w, e), rows,
                   accumulate_dx);
        if (kind == FfnKind::swiglu)
            linear_bwd(dev, dxg, gate_of(gw, e), g.dgate.view(r0 * F, {rows, F}), xg, gate_of(w, e),
                       rows, true);
    });
}

}  // namespace moetrain
