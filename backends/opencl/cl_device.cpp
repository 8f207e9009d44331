// ClDevice core: context/queue setup, buffers, transfers, fill/copy/convert, kernel lookup and
// launching (see cl_device.h).
#include "cl_device.h"

#include <algorithm>
#include <cstring>

#include "cl_device_query.h"

namespace moetrain::opencl {
namespace {

// Largest power of two <= n (n >= 1).
size_t pow2_floor(size_t n) {
    size_t p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

}  // namespace

ClDevice::ClDevice(cl_platform_id platform, cl_device_id dev, std::string name)
    : dev_(dev), name_(std::move(name)), scratch_(kScratchSlots, {nullptr, 0}) {
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                     reinterpret_cast<cl_context_properties>(platform), 0};
    cl_int err = CL_SUCCESS;
    ctx_ = clCreateContext(props, 1, &dev_, nullptr, nullptr, &err);
    cl_check(err, "creating an OpenCL context for " + name_);
    queue_ = clCreateCommandQueue(ctx_, dev_, 0, &err);
    if (err != CL_SUCCESS) {
        clReleaseContext(ctx_);
        cl_check(err, "creating the command queue of " + name_);
    }
    max_alloc_ = device_info<cl_ulong>(dev_, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    if (device_info<cl_device_type>(dev_, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_CPU) reduce_wg_ = 1;
    std::string options = "-cl-std=CL1.2";
    if (device_info<cl_device_fp_config>(dev_, CL_DEVICE_SINGLE_FP_CONFIG) &
        CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)
        options += " -cl-fp32-correctly-rounded-divide-sqrt";
    std::string key = device_string(dev_, CL_DEVICE_NAME) + '\0' +
                      device_string(dev_, CL_DEVICE_VERSION) + '\0' +
                      device_string(dev_, CL_DRIVER_VERSION) + '\0' +
                      platform_string(platform, CL_PLATFORM_NAME) + '\0' +
                      platform_string(platform, CL_PLATFORM_VERSION);
    programs_ = std::make_unique<ProgramCache>(ctx_, dev_, key, options);
    dummy_ = create_buffer(16, "allocating the placeholder buffer");
    err_ = create_buffer(2 * sizeof(cl_int), "allocating the device error word");
    const cl_int zero = 0;
    cl_check(clEnqueueFillBuffer(queue_, err_, &zero, sizeof(zero), 0, 2 * sizeof(cl_int), 0,
                                 nullptr, nullptr),
             "clearing the device error word");
}

ClDevice::~ClDevice() {
    clFinish(queue_);
    for (auto& [name, k] : kernels_) clReleaseKernel(k.handle);
    for (auto& [mem, bytes] : scratch_)
        if (mem) clReleaseMemObject(mem);
    clReleaseMemObject(dummy_);
    clReleaseMemObject(err_);
    programs_.reset();
    clReleaseCommandQueue(queue_);
    clReleaseContext(ctx_);
}

cl_mem ClDevice::create_buffer(size_t bytes, const char* what) {
    MT_CHECK(bytes <= max_alloc_, "OpenCL allocation of ", bytes, " bytes exceeds the device's ",
             "largest allocation (", max_alloc_, " bytes) on ", name_);
    cl_int err = CL_SUCCESS;
    // Zero-byte buffers are invalid in OpenCL: keep a minimal allocation.
    cl_mem mem =
        clCreateBuffer(ctx_, CL_MEM_READ_WRITE, std::max<size_t>(bytes, 16), nullptr, &err);
    cl_check(err, what);
    return mem;
}

std::shared_ptr<Buffer> ClDevice::alloc_buffer(size_t bytes) {
    cl_mem mem = create_buffer(bytes, "allocating a device buffer");
    auto buf = std::make_shared<ClBuffer>(this, bytes, mem);
    if (bytes > 0) {
        const cl_uchar zero = 0;
        cl_check(clEnqueueFillBuffer(queue_, mem, &zero, 1, 0, bytes, 0, nullptr, nullptr),
                 "zero-filling a new buffer");
    }
    return buf;
}

DevPtr ClDevice::arg(const Tensor& t) const {
    if (!t.buf) return {dummy_, 0};
    return {static_cast<const ClBuffer*>(t.buf.get())->mem(), static_cast<cl_long>(t.offset)};
}

DevPtr ClDevice::scratch(int slot, size_t bytes) {
    auto& [mem, size] = scratch_.at(static_cast<size_t>(slot));
    if (!mem || size < bytes) {
        // Queued kernels keep their own reference: releasing here is safe (in-order queue).
        if (mem) clReleaseMemObject(mem);
        mem = nullptr;
        size = 0;
        mem = create_buffer(bytes, "allocating device scratch memory");
        size = bytes;
    }
    return {mem, 0};
}

void ClDevice::upload_impl(const Tensor& dst, const void* src) {
    if (dst.bytes() == 0) return;
    DevPtr d = arg(dst);
    size_t es = dtype_size(dst.dtype);
    cl_check(clEnqueueWriteBuffer(queue_, d.mem, CL_TRUE, static_cast<size_t>(d.off) * es,
                                  dst.bytes(), src, 0, nullptr, nullptr),
             "uploading to the device");
}

void ClDevice::download_impl(void* dst, const Tensor& src) {
    if (src.bytes() == 0) return;
    DevPtr s = arg(src);
    size_t es = dtype_size(src.dtype);
    cl_check(clEnqueueReadBuffer(queue_, s.mem, CL_TRUE, static_cast<size_t>(s.off) * es,
                                 src.bytes(), dst, 0, nullptr, nullptr),
             "downloading from the device");
    check_device_error();
}

void ClDevice::copy_impl(const Tensor& dst, const Tensor& src) {
    int64_t n = dst.numel();
    if (n == 0) return;
    DevPtr d = arg(dst);
    DevPtr s = arg(src);
    size_t es = dtype_size(dst.dtype), bytes = static_cast<size_t>(n) * es;
    size_t doff = static_cast<size_t>(d.off) * es, soff = static_cast<size_t>(s.off) * es;
    if (d.mem == s.mem && doff == soff) return;
    if (d.mem == s.mem && doff < soff + bytes && soff < doff + bytes) {
        // Overlapping ranges of one buffer (OpenCL forbids that copy): go through scratch.
        DevPtr tmp = scratch(0, bytes);
        cl_check(clEnqueueCopyBuffer(queue_, s.mem, tmp.mem, soff, 0, bytes, 0, nullptr, nullptr),
                 "copying a tensor into scratch");
        cl_check(clEnqueueCopyBuffer(queue_, tmp.mem, d.mem, 0, doff, bytes, 0, nullptr, nullptr),
                 "copying a tensor from scratch");
        return;
    }
    cl_check(clEnqueueCopyBuffer(queue_, s.mem, d.mem, soff, doff, bytes, 0, nullptr, nullptr),
             "copying a tensor");
}

void ClDevice::fill_impl(const Tensor& dst, float value) {
    int64_t n = dst.numel();
    if (n == 0) return;
    DevPtr d = arg(dst);
    unsigned char pattern[4];
    size_t es = dtype_size(dst.dtype);
    switch (dst.dtype) {
        case DType::f32:
            std::memcpy(pattern, &value, 4);
            break;
        case DType::bf16: {
            uint16_t h = f32_to_bf16(value);
            std::memcpy(pattern, &h, 2);
            break;
        }
        case DType::f16: {
            uint16_t h = f32_to_f16(value);
            std::memcpy(pattern, &h, 2);
            break;
        }
        case DType::i32: {
            int32_t i = static_cast<int32_t>(value);
            std::memcpy(pattern, &i, 4);
            break;
        }
        case DType::u8:
            pattern[0] = static_cast<unsigned char>(value);
            break;
    }
    cl_check(clEnqueueFillBuffer(queue_, d.mem, pattern, es, static_cast<size_t>(d.off) * es,
                                 static_cast<size_t>(n) * es, 0, nullptr, nullptr),
             "filling a tensor");
}

void ClDevice::convert_impl(const Tensor& dst, const Tensor& src) {
    auto code = [](DType t) -> cl_int {
        switch (t) {
            case DType::f32:
                return 0;
            case DType::bf16:
                return 1;
            case DType::f16:
                return 2;
            default:
                fail("convert: only f32, bf16 and f16 tensors can be converted, got ",
                     dtype_name(t));
        }
    };
    cl_int to = code(dst.dtype), from = code(src.dtype);
    int64_t n = dst.numel();
    if (n == 0) return;
    if (to == from) return copy(dst, src);
    DevPtr d = arg(dst);
    DevPtr s = arg(src);
    // 16-bit types travel as ushort, f32 as float: one kernel per direction family.
    if (to == 0)
        launch("convert", "mt_half_to_f32", items(n), d, s, from, static_cast<cl_long>(n));
    else if (from == 0)
        launch("convert", "mt_f32_to_half", items(n), d, s, to, static_cast<cl_long>(n));
    else
        launch("convert", "mt_half_to_half", items(n), d, s, from, to, static_cast<cl_long>(n));
}

void ClDevice::synchronize() {
    cl_check(clFinish(queue_), "waiting for the device queue");
    check_device_error();
}

void ClDevice::check_device_error() {
    cl_int word[2] = {0, 0};
    cl_check(clEnqueueReadBuffer(queue_, err_, CL_TRUE, 0, sizeof(word), word, 0, nullptr, nullptr),
             "reading the device error word");
    if (word[0] == 0) return;
    const cl_int zero = 0;
    cl_check(clEnqueueFillBuffer(queue_, err_, &zero, sizeof(zero), 0, sizeof(word), 0, nullptr,
                                 nullptr),
             "clearing the device error word");
    // Codes as used by the kernels' mt_report calls.
    const char* what = "unknown device error";
    switch (word[0]) {
        case 1:
            what = "cross_entropy: target outside [0, V) and not -1:";
            break;
        case 2:
            what = "moe_sort: expert index outside [0, n_experts):";
            break;
        case 3:
            what = "router_bwd: expert index outside [0, n_experts):";
            break;
        case 4:
            what = "embedding_fwd: token id outside the table:";
            break;
        case 5:
            what = "embedding_bwd: token id outside the table:";
            break;
        case 6:
            what = "gather_rows: row index outside the source:";
            break;
        case 7:
            what = "moe_combine: slot_row entry outside the rows:";
            break;
        case 8:
            what = "moe_combine_bwd: slot_row entry outside the rows:";
            break;
        case 9:
            what = "moe_capacity: expert index outside [0, n_experts):";
            break;
        case 11:
            what = "rope: device position offset outside [0, 2^30):";
            break;
        case 12:
            what = "attention: device length makes Tk leave [Tq, S]:";
            break;
        case 13:
            what = "kv_append: device position offset outside the cache:";
            break;
        default:
            break;
    }
    fail(what, " ", word[1], " (detected on ", name_, ")");
}

const ClDevice::Kernel& ClDevice::kernel(const char* family, const char* name) {
    std::string key = std::string(family) + "/" + name;
    if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
    cl_program prog = programs_->program(family);
    cl_int err = CL_SUCCESS;
    Kernel k{clCreateKernel(prog, name, &err), 0};
    cl_check(err, "creating kernel " + key);
    err = clGetKernelWorkGroupInfo(k.handle, dev_, CL_KERNEL_WORK_GROUP_SIZE, sizeof(k.max_wg),
                                   &k.max_wg, nullptr);
    if (err != CL_SUCCESS) {
        clReleaseKernel(k.handle);
        cl_check(err, "querying the work-group size of kernel " + key);
    }
    return kernels_[key] = k;
}

void ClDevice::set_raw(cl_kernel k, cl_uint& index, size_t size, const void* value,
                       const char* name) {
    cl_int err = clSetKernelArg(k, index, size, value);
    if (err != CL_SUCCESS)
        cl_check(err, "setting argument " + std::to_string(index) + " of kernel " + name);
    ++index;
}

void ClDevice::enqueue(const Kernel& k, const Grid& grid, const char* name) {
    if (grid.count[0] == 0 || grid.count[1] == 0) return;
    size_t wg = pow2_floor(std::max<size_t>(1, std::min(grid.wg, k.max_wg)));
    size_t global[2], local[2] = {wg, 1};
    global[0] = grid.groups ? grid.count[0] * wg : (grid.count[0] + wg - 1) / wg * wg;
    global[1] = grid.count[1];
    cl_check(clEnqueueNDRangeKernel(queue_, k.handle, grid.dims, nullptr, global, local, 0, nullptr,
                                    nullptr),
             std::string("launching kernel ") + name);
}

}  // namespace moetrain::opencl
