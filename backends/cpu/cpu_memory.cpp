// CPU device memory: 64-byte aligned zero-filled host buffers, transfers (plain copies),
// fill of any dtype and f32 / bf16 / f16 conversion with the round-to-nearest-even helpers
// of dtype.h.
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "cpu/cpu_device.h"
#include "cpu/cpu_parallel.h"

namespace moetrain {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
// From this size on a buffer is 2 MiB aligned and asks for transparent huge pages: streaming
// ops (AdamW, element-wise passes, batch-1 decode GEMVs) then take far fewer TLB misses,
// which on a virtual machine (nested page walks) costs a large share of memory bandwidth.
constexpr size_t kHugeFrom = 4 * kHugePage;
}  // namespace

CpuBuffer::CpuBuffer(Device* device, size_t bytes) : Buffer(device, bytes) {
    const bool huge = bytes >= kHugeFrom;
    const size_t align = huge ? kHugePage : 64;
    size_t rounded = (bytes + align - 1) / align * align;
    if (rounded == 0) rounded = 64;
    data_ = std::aligned_alloc(align, rounded);
    MT_CHECK(data_, "cpu: out of host memory allocating ", bytes, " bytes");
    if (huge) madvise(data_, rounded, MADV_HUGEPAGE);  // a hint: failure only costs speed
    std::memset(data_, 0, rounded);
}

CpuBuffer::~CpuBuffer() {
    std::free(data_);
}

std::shared_ptr<Buffer> CpuDevice::alloc_buffer(size_t bytes) {
    return std::make_shared<CpuBuffer>(this, bytes);
}

void CpuDevice::upload_impl(const Tensor& dst, const void* src) {
    void* d = raw(dst);
    if (dst.bytes()) std::memcpy(d, src, dst.bytes());
}

void CpuDevice::download_impl(void* dst, const Tensor& src) {
    const void* s = raw(src);
    if (src.bytes()) std::memcpy(dst, s, src.bytes());
}

void CpuDevice::copy_impl(const Tensor& dst, const Tensor& src) {
    void* d = raw(dst);
    const void* s = raw(src);
    if (dst.bytes()) std::memmove(d, s, dst.bytes());
}

namespace {
template <typename T>
void fill_with(T* p, int64_t n, T value) {
#pragma omp parallel for schedule(static) if (n > 4 * cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) p[i] = value;
}

float load_float(const void* p, DType t, int64_t i) {
    switch (t) {
        case DType::bf16:
            return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
        case DType::f16:
            return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
        default:
            return static_cast<const float*>(p)[i];
    }
}

void store_float(void* p, DType t, int64_t i, float v) {
    switch (t) {
        case DType::bf16:
            static_cast<uint16_t*>(p)[i] = f32_to_bf16(v);
            break;
        case DType::f16:
            static_cast<uint16_t*>(p)[i] = f32_to_f16(v);
            break;
        default:
            static_cast<float*>(p)[i] = v;
            break;
    }
}
}  // namespace

void CpuDevice::fill_impl(const Tensor& dst, float value) {
    void* d = raw(dst);
    const int64_t n = dst.numel();
    switch (dst.dtype) {
        case DType::f32:
            fill_with(static_cast<float*>(d), n, value);
            break;
        case DType::bf16:
            fill_with(static_cast<uint16_t*>(d), n, f32_to_bf16(value));
            break;
        case DType::f16:
            fill_with(static_cast<uint16_t*>(d), n, f32_to_f16(value));
            break;
        case DType::i32:
            fill_with(static_cast<int32_t*>(d), n, static_cast<int32_t>(value));
            break;
        case DType::u8:
            fill_with(static_cast<uint8_t*>(d), n,
                      static_cast<uint8_t>(static_cast<int32_t>(value)));
            break;
    }
}

void CpuDevice::convert_impl(const Tensor& dst, const Tensor& src) {
    void* d = raw(dst);
    const void* s = raw(src);
    const int64_t n = dst.numel();
    const DType dt = dst.dtype, st = src.dtype;
#pragma omp parallel for schedule(static) if (n > 4 * cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) store_float(d, dt, i, load_float(s, st, i));
}

}  // namespace moetrain
