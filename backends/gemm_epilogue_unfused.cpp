// Device::gemm_epilogue_unfused: the GEMM epilogue (api/moetrain/device_ops.def gemm_epilogue) as
// the backend's own gemm, add_bias, act_fwd / act_bwd and bias_grad, in that order. The cpu and
// opencl backends run gemm_epilogue this way (the same bits as the ops the model called before
// the op existed); cuda runs it when cuBLASLt offers no algorithm for the product and its
// epilogue.
#include "moetrain/device.h"

namespace moetrain {

void Device::gemm_epilogue_unfused(const GemmArgs& g, const GemmEpilogue& e) {
    if (g.m == 0 || g.n == 0) return;
    if (e.act != EpilogueAct::gelu) {
        gemm_impl(g);
        if (e.bias) add_bias_impl(g.c, e.bias, g.m, g.n);
        // A = dy stored [k, m] densely (checked): its column sums are the bias gradient
        // (bias_grad reads a dy stored in 16 bits as it is).
        if (e.dbias) bias_grad_impl(e.dbias, g.a, g.k, g.m);
        // The GELU backward in place: every backend's act_bwd reads element i of dy and x
        // before it writes element i of dx.
        if (e.act == EpilogueAct::gelu_grad)
            act_bwd_impl(Act::gelu, g.c, g.c, e.pre_act, g.m * g.n);
        return;
    }
    GemmArgs pre = g;  // beta is 0: the product goes to pre_act, C is only written
    pre.c = e.pre_act;
    gemm_impl(pre);
    if (e.bias) add_bias_impl(e.pre_act, e.bias, g.m, g.n);
    act_fwd_impl(Act::gelu, g.c, e.pre_act, g.m * g.n);
}

}  // namespace moetrain
