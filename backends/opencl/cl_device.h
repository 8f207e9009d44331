// The OpenCL Device: one context, one in-order queue, buffers (cl_mem + element offsets),
// kernel programs built on first use (cl_program_cache) and a small launch helper. The ops are
// implemented in one file per family (cl_ops_*.cpp, cl_gemm.cpp); every op runs on the device.
// A ClDevice is driven by one host thread at a time, like the other backends' devices.
#pragma once

#include <CL/cl.h>

#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cl_errors.h"
#include "cl_program_cache.h"
#include "moetrain/device.h"

namespace moetrain::opencl {

// A device allocation.
class ClBuffer : public Buffer {
  public:
    ClBuffer(Device* dev, size_t bytes, cl_mem mem) : Buffer(dev, bytes), mem_(mem) {}
    ~ClBuffer() override { clReleaseMemObject(mem_); }
    cl_mem mem() const { return mem_; }

  private:
    cl_mem mem_;
};

// A tensor as kernel arguments: the buffer and the element offset (two kernel parameters,
// `__global T* p, long p_off`).
struct DevPtr {
    cl_mem mem;
    cl_long off;
};

// The code the kernels (float16.clh) give a floating dtype: 0 f32, 1 bf16, 2 f16, which are
// DType's own values.
inline cl_int float_code(DType t) {
    static_assert(static_cast<int>(DType::f32) == 0 && static_cast<int>(DType::bf16) == 1 &&
                  static_cast<int>(DType::f16) == 2);
    if (t != DType::f32 && t != DType::bf16 && t != DType::f16)
        fail("OpenCL kernels: only f32, bf16 and f16 floats, got ", dtype_name(t));
    return static_cast<cl_int>(t);
}

// A device-side value argument (device.h: i32 [1] or empty) as three kernel parameters,
// `__global const int* p, long p_off, int has_p` (read with mt_dev_value, common.clh).
struct DevValue {
    DevPtr ptr;
    cl_int has;
};
// A __local kernel argument of `bytes` bytes.
struct LocalBytes {
    size_t bytes;
};

// Launch geometry: up to 2 dimensions; work-groups are `wg` x 1. With groups = false, count
// is a number of work-items (rounded up to whole work-groups; kernels check bounds), else a
// number of work-groups along dimension 0.
struct Grid {
    size_t count[2] = {1, 1};
    size_t wg = 256;
    bool groups = false;
    cl_uint dims = 1;
};
inline Grid items(int64_t n, size_t wg = 256) {
    Grid g;
    g.count[0] = static_cast<size_t>(n);
    g.wg = wg;
    return g;
}
inline Grid items2(int64_t n0, int64_t n1, size_t wg = 64) {
    Grid g = items(n0, wg);
    g.count[1] = static_cast<size_t>(n1);
    g.dims = 2;
    return g;
}
inline Grid groups(int64_t n, size_t wg) {
    Grid g = items(n, wg);
    g.groups = true;
    return g;
}

class ClDevice : public Device {
  public:
    ClDevice(cl_platform_id platform, cl_device_id dev, std::string name);
    ~ClDevice() override;

    std::string backend_name() const override { return "opencl"; }
    std::string name() const override { return name_; }

    std::shared_ptr<Buffer> alloc_buffer(size_t bytes) override;  // cl_device.cpp
    size_t max_buffer_bytes() const override { return max_alloc_; }
    void synchronize() override;

    // ---- helpers for the op files ----
    cl_command_queue queue() const { return queue_; }
    // A tensor as a kernel argument (checked by the front door, device_checks.cpp); an empty
    // tensor ("may be empty" arguments) is passed as a placeholder buffer.
    DevPtr arg(const Tensor& t) const;
    DevValue dev_value(const Tensor& t) const { return {arg(t), cl_int{!t.empty()}}; }
    // The device error word (kernels report bad indices into it with mt_report, common.clh).
    DevPtr error_word() const { return {err_, 0}; }
    // Throws the error a kernel reported since the last check (and clears it); waits for the
    // queue. Called by the ops that must fail at once and by download() / synchronize().
    void check_device_error();
    // Whole rows of `dim` elements from t's offset to the end of its buffer (the bound that
    // kernels indexing rows by device-side ids check against).
    static int64_t rows_in(const Tensor& t, int64_t dim) {
        return (static_cast<int64_t>(t.buf->bytes() / dtype_size(t.dtype)) - t.offset) / dim;
    }
    // Work-groups for kernels that reduce inside a work-group (a row, a partial sum): n groups
    // of reduce_wg() work-items. CPU devices (PoCL) run a work-group as a loop and every
    // barrier splits it, so they get 1 work-item per group; GPUs get 128.
    Grid reduce_groups(int64_t n) const { return groups(n, reduce_wg_); }
    // Device scratch memory (slot 0..kScratchSlots-1), valid until the next request of the
    // same slot; ops use it for partial results between their kernels.
    DevPtr scratch(int slot, size_t bytes);
    // Sets the arguments (DevPtr = 2 parameters, LocalBytes, scalars) and enqueues the kernel.
    template <typename... Args>
    void launch(const char* family, const char* kernel_name, const Grid& grid,
                const Args&... args) {
        const Kernel& k = kernel(family, kernel_name);
        cl_uint index = 0;
        (set_arg(k.handle, index, args, kernel_name), ...);
        enqueue(k, grid, kernel_name);
    }
    // Column sums of [rows, cols] matrices, shared by several ops (cl_ops_reduce.cpp): a
    // partial kernel writes buf[chunk * cols + c] for fixed chunks of chunk_rows rows, then
    // finish_column_sums adds the chunks in order.
    struct ColumnPartials {
        DevPtr buf;
        int64_t chunk_rows, chunks;
    };
    ColumnPartials column_partials(int slot, int64_t rows, int64_t cols);
    // dst[c] (+)= sum over chunks of p.buf[chunk * cols + c], in chunk order.
    void finish_column_sums(DevPtr dst, const ColumnPartials& p, int64_t cols, bool accumulate);

    static constexpr int kScratchSlots = 4;

  protected:
    // Every op of api/moetrain/device_ops.def: memory ops in cl_device.cpp, the others one file
    // per family (cl_ops_<family>.cpp, cl_gemm.cpp).
#define MT_DEVICE_OP(name, params, args, ...) void name##_impl params override;
#include "moetrain/device_ops.def"

  private:
    struct Kernel {
        cl_kernel handle;
        size_t max_wg;  // CL_KERNEL_WORK_GROUP_SIZE on this device
    };
    const Kernel& kernel(const char* family, const char* name);
    void enqueue(const Kernel& k, const Grid& grid, const char* name);
    static void set_raw(cl_kernel k, cl_uint& index, size_t size, const void* value,
                        const char* name);
    static void set_arg(cl_kernel k, cl_uint& index, const DevPtr& p, const char* name) {
        set_raw(k, index, sizeof(cl_mem), static_cast<const void*>(&p.mem), name);
        set_raw(k, index, sizeof(cl_long), &p.off, name);
    }
    static void set_arg(cl_kernel k, cl_uint& index, const DevValue& v, const char* name) {
        set_arg(k, index, v.ptr, name);
        set_raw(k, index, sizeof(cl_int), &v.has, name);
    }
    static void set_arg(cl_kernel k, cl_uint& index, const LocalBytes& l, const char* name) {
        set_raw(k, index, l.bytes, nullptr, name);
    }
    template <typename T>
    static void set_arg(cl_kernel k, cl_uint& index, const T& v, const char* name) {
        static_assert(std::is_same_v<T, cl_int> || std::is_same_v<T, cl_long> ||
                          std::is_same_v<T, cl_uint> || std::is_same_v<T, cl_ulong> ||
                          std::is_same_v<T, cl_float> || std::is_same_v<T, cl_double>,
                      "kernel scalars are int, long, uint, ulong, float or double");
        set_raw(k, index, sizeof(T), &v, name);
    }
    cl_mem create_buffer(size_t bytes, const char* what);

    cl_context ctx_ = nullptr;
    cl_command_queue queue_ = nullptr;
    cl_device_id dev_ = nullptr;
    std::string name_;
    std::unique_ptr<ProgramCache> programs_;
    std::map<std::string, Kernel> kernels_;
    cl_mem dummy_ = nullptr;
    cl_mem err_ = nullptr;  // cl_int[2]: report code (0 = none), offending value
    std::vector<std::pair<cl_mem, size_t>> scratch_;
    size_t max_alloc_ = 0;
    size_t reduce_wg_ = 128;
};

}  // namespace moetrain::opencl
