// The memory planner (moetrain plan): its parts equal what the real allocation code takes on a
// real device (parameters, gradients, moments, the planned training workspace), each lever
// moves the part it should, and the planning device refuses to run ops.
#include <doctest/doctest.h>

#include <algorithm>

#include "launch.h"
#include "moetrain/memory_plan.h"
#include "planning/planning_device.h"
#include "test_xbackend_util.h"

using namespace moetrain;
namespace xb = moetrain::xbackend;

TEST_CASE("plan: every part equals the allocations of a real model on the cpu") {
    auto dev = open_device("cpu");
    for (const auto& nc : {xb::config_dense(), xb::config_moe_softmax(), xb::config_moe_hash()}) {
        for (Recompute r : {Recompute::none, Recompute::block, Recompute::ffn}) {
            CAPTURE(nc.name);
            CAPTURE(to_string(r));
            PlanOptions o;
            o.batch = 3;
            o.seq = 16;
            o.recompute = r;
            const MemoryPlan p = plan_training_memory(nc.cfg, o);
            Model m(*dev, nc.cfg);
            m.set_recompute(r);
            const double P = static_cast<double>(m.num_params());
            CHECK(p.weights == 4 * P);
            CHECK(p.master_weights == 0);
            CHECK(p.grads == doctest::Approx(4 * P).epsilon(1e-3));  // + 7 floats of loss stats
            CHECK(p.optimizer == 8 * P);
            CHECK(p.activations > 0);
            CHECK(p.activations + p.workspace - p.op_scratch ==
                  static_cast<double>(m.training_workspace_bytes(o.batch, o.seq)));
            // fp32: embedding_bwd's sort (cuda), and the grouped expert GEMMs (MoE) take op
            // scratch; without experts it is the embedding's.
            const int64_t N = o.batch * o.seq;
            const double emb = static_cast<double>(mtk::embedding_bwd_scratch_bytes(
                N, nc.cfg.d_model, 2 * mtk::embedding_index_bytes(N)));
            CHECK(emb > 0);
            CHECK(p.op_scratch >= emb);
            if (!nc.cfg.moe) CHECK(p.op_scratch == emb);
        }
    }
}

TEST_CASE("plan: each lever shrinks its own part") {
    const ModelConfig c = xb::config_moe_softmax().cfg;
    PlanOptions o;
    o.batch = 4;
    o.seq = 32;
    const MemoryPlan base = plan_training_memory(c, o);

    PlanOptions block = o, ffn = o, bf16 = o, sgd = o, adam8 = o;
    block.recompute = Recompute::block;
    ffn.recompute = Recompute::ffn;
    const MemoryPlan pb = plan_training_memory(c, block), pf = plan_training_memory(c, ffn);
    CHECK(pb.activations < pf.activations);
    CHECK(pf.activations < base.activations);
    CHECK(pb.weights == base.weights);

    bf16.precision = Precision::bf16;
    const MemoryPlan p16 = plan_training_memory(c, bf16);
    CHECK(p16.master_weights == base.weights);  // the fp32 parameters move to "master"
    CHECK(p16.weights > 0);
    CHECK(p16.weights < base.weights / 2);  // 2 bytes per matrix element only
    // + GEMM operand conversion buffers, or the grouped expert GEMMs' buffers if larger.
    CHECK(p16.op_scratch > 0);
    // Activations only products read are stored in bf16, 2 bytes less per element: each
    // layer's attention norm output, expert input rows and hiddens, shared-expert hidden (the
    // FFN norm output stays f32: the fp32 router reads it).
    const MoeConfig& mc = *c.moe;
    const double N = o.batch * o.seq, D = c.d_model, F = c.d_ff, k = mc.active_k();
    const double per_layer = N * D + N * k * D + N * k * F + N * mc.n_shared_experts * F;
    CHECK(base.activations - p16.activations == 2 * c.n_layers * per_layer);

    sgd.optimizer = OptimizerKind::sgd;
    CHECK(plan_training_memory(c, sgd).optimizer == 0);
    adam8.optimizer = OptimizerKind::adamw8bit;  // 2 code bytes per parameter + 8 per 256
    const double p8 = plan_training_memory(c, adam8).optimizer;
    CHECK(p8 >= base.optimizer / 4);
    CHECK(p8 <= base.optimizer / 4 * (1 + 1.0 / 64) + 16);

    PlanOptions bad = o;
    bad.seq = c.max_seq_len + 1;
    CHECK_THROWS_AS(plan_training_memory(c, bad), Error);
}

TEST_CASE("plan: the planning device counts live bytes, copies nothing and refuses to compute") {
    PlanningDevice d;
    const Tensor t = d.alloc(DType::f32, {10, 3});
    CHECK(d.allocated() == 120);
    {
        const Tensor u = d.alloc(DType::bf16, {5});
        CHECK(d.allocated() == 130);
    }
    CHECK(d.allocated() == 120);  // freed with its last view
    const Tensor v = d.alloc(DType::f32, {30});
    d.copy(v, t);  // a re-layout of planned buffers: nothing to move
    CHECK(d.allocated() == 240);
    CHECK_THROWS_WITH_AS(d.fill(t, 0.0f),
                         "the memory planner's device cannot run fill: it only counts allocations",
                         Error);
}

// --attention16 (cuda): cuDNN's fused attention takes 16-bit copies of q, k, v, o, dout, dq,
// dk, dv and its backward's workspace (cudnn-frontend's Hopper sizing) from the op scratch, so
// the plan's op scratch covers them; in fp32, without the option, at a head_dim cuDNN is not
// offered, or where that workspace is over the limit (moetrain's kernels run), nothing changes.
TEST_CASE("plan: --attention16 counts cuDNN attention's scratch") {
    ModelConfig c = xb::config_dense().cfg;
    c.max_seq_len = 8192;
    PlanOptions o;
    o.batch = 16;
    o.seq = 1024;
    o.precision = Precision::bf16;
    const MemoryPlan plain = plan_training_memory(c, o);
    PlanOptions a16 = o;
    a16.attention16 = true;
    const MemoryPlan p = plan_training_memory(c, a16);
    const double B = 16, T = 1024, H = static_cast<double>(c.n_heads),
                 K = static_cast<double>(c.n_kv_heads), hd = static_cast<double>(c.head_dim);
    const double want = B * H * T * T * 2 + B * H * T * hd * 4 + 2 * 4 * B * T * (H + K) * hd;
    CHECK(p.op_scratch == std::max(plain.op_scratch, want));
    CHECK(p.op_scratch > plain.op_scratch);  // at this size cuDNN's backward dominates
    CHECK(p.total() - plain.total() == p.op_scratch - plain.op_scratch);

    PlanOptions fp32 = a16;
    fp32.precision = Precision::fp32;  // attention16 needs a 16-bit precision
    PlanOptions fp32_plain = fp32;
    fp32_plain.attention16 = false;
    CHECK(plan_training_memory(c, fp32).op_scratch ==
          plan_training_memory(c, fp32_plain).op_scratch);
    PlanOptions longer = a16;  // B16 T8192: the score gradients alone are over 4 GiB
    longer.seq = 8192;
    PlanOptions longer_plain = longer;
    longer_plain.attention16 = false;
    CHECK(plan_training_memory(c, longer).op_scratch ==
          plan_training_memory(c, longer_plain).op_scratch);
}
