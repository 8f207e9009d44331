// The CPU Device: host memory (64-byte aligned, zeroed) and every op of api/moetrain/device.h
// as OpenMP loops, with every matrix product through the GEMM library (cpu_gemm.cpp).
// The ops are split by family over cpu_*.cpp; the front door (api/moetrain/device.h) has
// checked their arguments, so the op files only turn tensors into host pointers.
//
// Determinism: work is split into fixed pieces (rows, or fixed-size chunks) that do not depend
// on the thread count, and partial sums are combined in a fixed order, so results are
// bit-identical run to run (and, apart from the GEMM library, across thread counts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "moetrain/device.h"
#include "shared/tensor_pointers.h"

namespace moetrain {

// One host allocation, aligned to 64 bytes and zero-filled.
class CpuBuffer : public Buffer {
  public:
    CpuBuffer(Device* device, size_t bytes);
    ~CpuBuffer() override;
    void* data() const { return data_; }

  private:
    void* data_ = nullptr;
};

class CpuDevice : public Device, public TensorPointers<CpuBuffer> {
  public:
    CpuDevice(std::string name, int threads);

    std::string backend_name() const override { return "cpu"; }
    std::string name() const override { return name_; }
    int threads() const { return threads_; }

    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override;  // cpu_memory.cpp
    void synchronize() override {}

    // ---- arguments of the op files: raw / f32 / i32 / f32s (TensorPointers) ----
    // The value of a "device-side value" argument (device.h): t[0] of an i32 [1] tensor, 0 when
    // t is empty.
    int64_t device_value(const Tensor& t) const { return t.buf ? *i32(t) : 0; }

    // Temporary memory of an op (at least `floats` floats, 64-byte aligned, contents
    // undefined), valid until the next call. It only grows, so once the first training step
    // has run the ops allocate nothing.
    float* scratch(size_t floats);
    double* scratch_f64(int64_t doubles) {
        return reinterpret_cast<double*>(scratch(2 * static_cast<size_t>(doubles)));
    }

  protected:
    // Every op of api/moetrain/device_ops.def, one file per family (cpu_<family>.cpp).
#define MT_DEVICE_OP(name, params, args, ...) void name##_impl params override;
#include "moetrain/device_ops.def"

  private:
    std::string name_;
    int threads_;
    std::unique_ptr<CpuBuffer> scratch_;
};

}  // namespace moetrain
