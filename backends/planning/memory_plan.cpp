// plan_training_memory (memory_plan.h): a Model, its Trainer and the training workspace of
// (B, T) built on a PlanningDevice, the bytes attributed part by part as they are allocated.
#include "moetrain/memory_plan.h"

#include <algorithm>
#include <utility>

#include "model/model_access.h"
#include "dispatch/dispatchers.h"
#include "launch.h"
#include "model/model_impl.h"
#include "planning/planning_device.h"
#include "shared/grouped_gemm_plan.h"

namespace moetrain {
namespace {

double bytes_of(std::initializer_list<const Tensor*> ts) {
    double b = 0;
    for (const Tensor* t : ts)
        if (*t) b += static_cast<double>(t->bytes());
    return b;
}

// The workspace buffers that are scratch rather than saved activations.
double scratch_bytes(const Workspace& ws) {
    const GradScratch& g = ws.g;
    return bytes_of({&ws.ids,    &ws.targets, &ws.pos_ids, &ws.logits, &ws.dlogits16,
                     &ws.losses, &g.dres,     &g.dxn,      &g.dq,      &g.dk,
                     &g.dv,      &g.d_o,      &g.dgate,    &g.dup,     &g.dh,
                     &g.drows,   &g.dxg,      &g.dw,       &g.dlogits, &g.dy16});
}

// The backends' op scratch is one area grown to the largest request (cpu, cuda), counted here
// for its users that grow with the batch:
// 16-bit products with an f32 operand convert it into a backend scratch buffer (cpu, cuda):
// the largest pair of f32 operands of any product, at 2 bytes per element.
double conversion_scratch(const ModelConfig& c, const Workspace& ws) {
    const double N = static_cast<double>(ws.N), D = c.d_model;
    const double q = static_cast<double>(c.n_heads) * c.head_dim;
    double widest = std::max<double>(c.d_ff, q);
    double rows = N;
    if (c.moe) {
        const double k = c.moe->active_k();
        widest = std::max(widest, static_cast<double>(c.moe->n_shared_experts) * c.d_ff);
        rows = std::max(rows, N * k);
    }
    const double layer = rows * (widest + D);
    // The head converts its f32 input rows (forward and weight gradient); its logits gradient
    // too unless the cross-entropy writes it in 16 bits (Workspace::dlogits16).
    const double head =
        static_cast<double>(ws.logit_rows) * (D + (ws.dlogits16 ? 0.0 : c.vocab_size));
    return 2.0 * std::max(layer, head);
}

// A weight-gradient product that also writes its bias gradient (GemmEpilogue::dbias, cuda) asks
// for one more float per output feature, in any precision: the linear layers with a bias.
double bias_grad_scratch(const ModelConfig& c) {
    if (!c.bias) return 0;
    const double q = static_cast<double>(c.n_heads) * c.head_dim;
    return 4.0 * std::max({static_cast<double>(c.d_ff), q, static_cast<double>(c.d_model)});
}

// The MoE expert products are grouped GEMMs; the CUDA backend takes their pointer arrays, dummy
// tiles, 16-bit operand copies (dim m) and weight-gradient round buffers (dim k) from its op
// scratch (backends/shared/grouped_gemm_plan.h): the largest request of the four shapes.
double grouped_scratch(const ModelConfig& c, const Workspace& ws, Precision precision) {
    if (!c.moe) return 0;
    const int64_t cap = ws.N * c.moe->active_k(), E = c.moe->n_experts, D = c.d_model, F = c.d_ff;
    const bool half = precision != Precision::fp32;
    const int64_t op_bytes = half ? 2 : 4;
    size_t most = 0;
    for (auto [n, k] : {std::pair{F, D}, std::pair{D, F}}) {  // gate / up / dx: n x k products
        // dim m: the f32 activation rows are converted for 16-bit products (the weights are
        // the 16-bit working copy already).
        most = std::max(
            most,
            grouped::make_plan(false, cap, E, cap, n, n, op_bytes, half ? cap * k : 0, 0).total());
        // dim k: the weight gradients [n, k].
        most = std::max(most, grouped::make_plan(true, cap, E, n, k, k, op_bytes, 0, 0).total());
    }
    return static_cast<double>(most);
}

// The CUDA embedding_bwd sorts the N token indices by id and keeps two partial rows per chunk of
// sorted tokens (kernels_cuda/launch.h); cub's temporaries for the sort are counted as its
// alternate key and value buffers (8 bytes per token), its digit histograms (a few KiB) are not.
double embedding_scratch(const ModelConfig& c, const Workspace& ws) {
    return static_cast<double>(
        mtk::embedding_bwd_scratch_bytes(ws.N, c.d_model, 2 * mtk::embedding_index_bytes(ws.N)));
}

// 16-bit attention on the training shape (PlanOptions::attention16, cuda): cuDNN's fused
// attention takes the 16-bit copies of q, k, v, o, dout, dq, dk, dv and its backward's
// workspace from the op scratch (backends/cuda/cuda_attention_cudnn.cpp), unless that workspace
// is over the limit and moetrain's own kernels run instead. The workspace is cudnn-frontend's
// Hopper sizing (launch.h), an estimate.
double cudnn_attention_scratch(const ModelConfig& c, const PlanOptions& o) {
    const int64_t B = o.batch, T = o.seq, H = c.n_heads, K = c.n_kv_heads, hd = c.head_dim;
    if (!o.attention16 || o.precision == Precision::fp32 ||
        !mtk::attn_cudnn_shape(true, T, T, T, hd, false, mtk::kAttnCudnnMinCc))
        return 0;
    const int64_t ws = mtk::attn_cudnn_bwd_workspace_estimate(B, H, T, hd);
    if (ws > mtk::kAttnCudnnMaxWorkspace) return 0;
    return static_cast<double>(ws + 2 * 4 * B * T * (H + K) * hd);
}

}  // namespace

MemoryPlan plan_training_memory(const ModelConfig& c, const PlanOptions& o) {
    MT_CHECK(o.batch >= 1 && o.seq >= 1, "plan: batch and seq must be >= 1 (got ", o.batch, ", ",
             o.seq, ")");
    MT_CHECK(o.seq <= c.max_seq_len, "plan: seq ", o.seq, " exceeds the model's max_seq_len ",
             c.max_seq_len);
    PlanningDevice dev;
    Model model(dev, c);  // parameters, gradients, the 4 + 3 floats of loss statistics
    ModelImpl& im = ModelAccess::impl(model);
    model.set_precision(o.precision);
    TrainOptions t;
    t.optimizer = o.optimizer;
    const std::unique_ptr<Communicator> ranks = make_planning_communicator(o.ranks);
    DistOptions dist{ranks.get(), o.zero};
    dist.expert_parallel = o.expert_parallel;
    // The model's parameter buffers, which an expert-parallel trainer shrinks to this rank's
    // experts; the trainer adds its state and scratch.
    auto model_bytes = [&] {
        return static_cast<double>(im.store.params.bytes() + im.store.grads.bytes() +
                                   (im.store.params_lo ? im.store.params_lo.bytes() : 0));
    };
    const double before = static_cast<double>(dev.allocated()) - model_bytes();  // stats etc.
    Trainer trainer(model, t, dist);
    const double params = static_cast<double>(im.store.params.bytes());
    MemoryPlan p;
    p.grads = static_cast<double>(im.store.grads.bytes()) + before;  // with the loss statistics
    if (o.precision == Precision::fp32) {
        p.weights = params;
    } else {
        p.weights = static_cast<double>(im.store.params_lo.bytes());
        p.master_weights = params;
    }
    p.optimizer = static_cast<double>(trainer.optimizer_state_bytes());
    p.zero_buffers = static_cast<double>(dev.allocated()) - model_bytes() - before - p.optimizer;
    model.set_recompute(o.recompute);
    const size_t mark = dev.allocated();
    const Workspace& ws = im.workspaces.get(o.batch, o.seq, true);
    const double all = static_cast<double>(dev.allocated() - mark);
    p.workspace = scratch_bytes(ws);
    p.activations = all - p.workspace;
    const double products =
        (o.precision != Precision::fp32 ? conversion_scratch(c, ws) : 0.0) + bias_grad_scratch(c);
    p.op_scratch = std::max({products, grouped_scratch(c, ws, o.precision),
                             embedding_scratch(c, ws), cudnn_attention_scratch(c, o)});
    p.workspace += p.op_scratch;
    if (o.expert_parallel > 1 && c.moe) {  // planned on the first expert-parallel pass
        int moe_layers = 0, first = -1;
        for (int l = 0; l < c.n_layers; ++l)
            if (c.is_moe_layer(l)) {
                if (first < 0) first = l;
                ++moe_layers;
            }
        const DType xg = ws.layers[static_cast<size_t>(first)].moe.xg.dtype;
        p.expert_dispatch = static_cast<double>(moe_dispatch_bytes(
            c, o.expert_parallel, moe_dispatch_rows_balanced(c, ws.N), xg, moe_layers));
        p.expert_dispatch_max = static_cast<double>(
            moe_dispatch_bytes(c, o.expert_parallel,
                               moe_dispatch_rows_max(c, o.expert_parallel, ws.N), xg, moe_layers));
    }
    return p;
}

}  // namespace moetrain
