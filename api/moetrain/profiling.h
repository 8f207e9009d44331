// A Device decorator that times every op of any backend (synchronising after each) and counts
// its FLOPs and bytes, for `moetrain bench --profile`. Works for every backend because it only
// forwards through the Device interface; its ops are the rows of api/moetrain/device_ops.def.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "moetrain/device.h"

namespace moetrain {

struct OpProfile {
    std::string op;
    int64_t calls = 0;
    double seconds = 0;
    double flops = 0;  // arithmetic (GEMM: 2mnk)
    double bytes = 0;  // estimated bytes read + written
};

class ProfilingDevice : public Device {
  public:
    // by_shape: matrix products (gemm, gemm_epilogue) are booked per shape, operand dtypes and
    // epilogue instead of per op (`bench --profile-shapes`).
    explicit ProfilingDevice(Device& inner, bool by_shape = false)
        : inner_(inner), by_shape_(by_shape) {}
    void reset() { table_.clear(); }
    std::vector<OpProfile> table() const;  // sorted by time, descending

    std::string backend_name() const override { return inner_.backend_name(); }
    std::string name() const override { return inner_.name(); }
    std::string attention_kernel(const AttnDims& d) const override {
        return inner_.attention_kernel(d);
    }
    std::string gemm_epilogue_kernel(const GemmArgs& g, const GemmEpilogue& e) const override {
        return inner_.gemm_epilogue_kernel(g, e);
    }
    std::string gemm_grouped_kernel(const GemmArgs& g, GroupDim dim) const override {
        return inner_.gemm_grouped_kernel(g, dim);
    }
    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override {
        return inner_.alloc_buffer(bytes);
    }
    size_t max_buffer_bytes() const override { return inner_.max_buffer_bytes(); }
    void synchronize() override { inner_.synchronize(); }
    const Device* tensor_owner() const override { return inner_.tensor_owner(); }

  protected:
#define MT_DEVICE_OP(name, params, args, ...) void name##_impl params override;
#include "moetrain/device_ops.def"

  private:
    // Runs fn, synchronises, and books the time and the op's FLOPs and bytes under `op`.
    template <typename Fn>
    void timed(const std::string& op, double flops, double bytes, Fn&& fn);

    Device& inner_;
    bool by_shape_ = false;
    std::map<std::string, OpProfile> table_;
};

}  // namespace moetrain
