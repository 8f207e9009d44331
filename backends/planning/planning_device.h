// A Device that allocates nothing: it hands out empty buffers and adds up their sizes, so the
// real allocation code (Model, Trainer, the workspace planner) can be run against it to learn
// exactly how many bytes a configuration would take on a real device — without the memory
// (seed-moe's 80 GB plan is computed on a laptop). Every op but copy refuses with one line:
// planning only allocates. A copy between planned buffers (a re-layout: an expert-parallel
// model keeping its own experts) moves nothing.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "moetrain/device.h"
#include "moetrain/error.h"

namespace moetrain {

class PlanningDevice : public Device {
  public:
    std::string backend_name() const override { return "planning"; }
    std::string name() const override { return "memory planner (allocates nothing)"; }
    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override {
        allocated_ += bytes;
        return std::make_shared<PlannedBuffer>(this, bytes);
    }
    void synchronize() override {}
    // Bytes of the buffers alive now.
    size_t allocated() const { return allocated_; }

  protected:
    // Every op but copy refuses (after the front door's argument checks), naming itself.
#define MT_DEVICE_OP(name, params, args, ...)   \
    void name##_impl params override {          \
        planned(#name, MT_DEVICE_OP_ARGS args); \
    }
#define MT_DEVICE_OP_ARGS(...) __VA_ARGS__
#include "moetrain/device_ops.def"
#undef MT_DEVICE_OP_ARGS

  private:
    class PlannedBuffer : public Buffer {
      public:
        PlannedBuffer(PlanningDevice* dev, size_t bytes) : Buffer(dev, bytes), dev_(dev) {}
        ~PlannedBuffer() override { dev_->allocated_ -= bytes(); }
        PlannedBuffer(const PlannedBuffer&) = delete;
        PlannedBuffer& operator=(const PlannedBuffer&) = delete;

      private:
        PlanningDevice* dev_;
    };
    template <typename... Args>
    static void planned(const char* op, const Args&...) {
        if (std::string_view(op) == "copy") return;
        fail("the memory planner's device cannot run ", op, ": it only counts allocations");
    }
    size_t allocated_ = 0;
};

}  // namespace moetrain
