// A Device that allocates nothing: it hands out empty buffers and adds up their sizes, so the
// real allocation code (Model, Trainer, the workspace planner) can be run against it to learn
// exactly how many bytes a configuration would take on a real device — without the memory
// (seed-moe's 80 GB plan is computed on a laptop). Every op refuses with one line: planning
// only allocates.
#pragma once

#include <memory>
#include <string>

#include "moetrain/device.h"
#include "moetrain/error.h"

namespace moetrain {

class PlanningDevice : public Device {
public:
    std::string backend_name() const override { return "planning"; }
    std::string name() const override { return "memory planner (allocates nothing)"; }
    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override {
        allocated_ += bytes;
        return std::make_shared<Buffer>(this, bytes);
    }
    void synchronize() override {}
    // Bytes handed out so far (buffers are never given back: a plan only grows).
    size_t allocated() const { return allocated_; }

    void upload(const Tensor&, const void*) override { refuse("upload"); }
    void download(void*, const Tensor&) override { refuse("download"); }
    void copy(const Tensor&, const Tensor&) override { refuse("copy"); }
    void fill(const Tensor&, float) override { refuse("fill"); }
    void convert(const Tensor&, const Tensor&) override { refuse("convert"); }
    void gemm(const GemmArgs&) override { refuse("gemm"); }
    void gemm_grouped(const GemmArgs&, const Tensor&, int64_t, GroupDim) override { refuse("gemm_grouped"); }
    void add(const Tensor&, const Tensor&, const Tensor&, int64_t) override { refuse("add"); }
    void axpby(const Tensor&, float, const Tensor&, float, int64_t) override { refuse("axpby"); }
    void add_bias(const Tensor&, const Tensor&, int64_t, int64_t) override { refuse("add_bias"); }
    void bias_grad(const Tensor&, const Tensor&, int64_t, int64_t) override { refuse("bias_grad"); }
    void embedding_fwd(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, bool) override { refuse("embedding_fwd"); }
    void embedding_bwd(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) override { refuse("embedding_bwd"); }
    void rmsnorm_fwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, float) override { refuse("rmsnorm_fwd"); }
    void rmsnorm_bwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, bool) override { refuse("rmsnorm_bwd"); }
    void layernorm_fwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, float) override { refuse("layernorm_fwd"); }
    void layernorm_bwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, bool) override { refuse("layernorm_bwd"); }
    void rope(const Tensor&, int64_t, int64_t, int64_t, int64_t, float, int64_t, const Tensor&, bool) override { refuse("rope"); }
    void kv_append(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, int64_t, int64_t, const Tensor&) override { refuse("kv_append"); }
    void attention_fwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttnDims&, float) override { refuse("attention_fwd"); }
    void attention_bwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttnDims&, float) override { refuse("attention_bwd"); }
    void act_fwd(Act, const Tensor&, const Tensor&, int64_t) override { refuse("act_fwd"); }
    void act_bwd(Act, const Tensor&, const Tensor&, const Tensor&, int64_t) override { refuse("act_bwd"); }
    void swiglu_fwd(const Tensor&, const Tensor&, const Tensor&, int64_t) override { refuse("swiglu_fwd"); }
    void swiglu_bwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t) override { refuse("swiglu_bwd"); }
    void softmax(const Tensor&, const Tensor&, int64_t, int64_t) override { refuse("softmax"); }
    void router_fwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t, bool) override { refuse("router_fwd"); }
    void router_bwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t, bool, float, float, float) override { refuse("router_bwd"); }
    void router_aux_loss(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t, float, float) override { refuse("router_aux_loss"); }
    void hash_route(const Tensor&, const Tensor&, int64_t, int64_t, int64_t) override { refuse("hash_route"); }
    void moe_sort(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t) override { refuse("moe_sort"); }
    void gather_rows(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) override { refuse("gather_rows"); }
    void moe_combine(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t, bool) override { refuse("moe_combine"); }
    void moe_combine_bwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t) override { refuse("moe_combine_bwd"); }
    void cross_entropy(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, float) override { refuse("cross_entropy"); }
    void sum(const Tensor&, const Tensor&, int64_t, float, bool) override { refuse("sum"); }
    void sum_squares(const Tensor&, const Tensor&, int64_t, bool) override { refuse("sum_squares"); }
    void adamw(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, const AdamWArgs&, const Tensor&, float, float) override { refuse("adamw"); }
    void adamw8bit(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, const AdamWArgs&, const Tensor&, float, float) override { refuse("adamw8bit"); }
    void sgd(const Tensor&, const Tensor&, int64_t, float, const Tensor&, float, float) override { refuse("sgd"); }
    void sample(const Tensor&, const Tensor&, int64_t, int64_t, const SampleArgs&) override { refuse("sample"); }

private:
    [[noreturn]] static void refuse(const char* op) {
        fail("the memory planner's device cannot run ", op, ": it only counts allocations");
    }
    size_t allocated_ = 0;
};

}  // namespace moetrain
