// CpuDevice construction and the argument checks every CPU op uses before touching memory.
#include "cpu/cpu_device.h"

#include <utility>

namespace moetrain {

CpuDevice::CpuDevice(std::string name, int threads) : name_(std::move(name)), threads_(threads) {}

void check_sizes(const char* op, std::initializer_list<int64_t> sizes) {
    for (int64_t s : sizes) MT_CHECK(s >= 0, op, ": negative size ", s);
}

void* CpuDevice::raw(const Tensor& t, const char* op, const char* arg) const {
    MT_CHECK(t.buf, op, ": tensor '", arg, "' is empty");
    MT_CHECK(t.device() == this, op, ": tensor '", arg, "' lives on another device");
    auto* b = static_cast<CpuBuffer*>(t.buf.get());
    MT_CHECK(t.offset >= 0 && static_cast<size_t>(t.offset) * dtype_size(t.dtype) + t.bytes() <=
                                  b->bytes(),
             op, ": tensor '", arg, "' view exceeds its buffer");
    return static_cast<char*>(b->data()) + static_cast<size_t>(t.offset) * dtype_size(t.dtype);
}

void* CpuDevice::checked(const Tensor& t, DType dtype, int64_t n, const char* op,
                         const char* arg) const {
    if (n == 0 && !t.buf) return nullptr;
    void* p = raw(t, op, arg);
    MT_CHECK(t.dtype == dtype, op, ": tensor '", arg, "' is ", dtype_name(t.dtype), ", expected ",
             dtype_name(dtype));
    MT_CHECK(t.numel() >= n, op, ": tensor '", arg, "' has ", t.numel(),
             " elements, the op needs ", n);
    return p;
}

float* CpuDevice::f32(const Tensor& t, int64_t n, const char* op, const char* arg) const {
    return static_cast<float*>(checked(t, DType::f32, n, op, arg));
}

int32_t* CpuDevice::i32(const Tensor& t, int64_t n, const char* op, const char* arg) const {
    return static_cast<int32_t*>(checked(t, DType::i32, n, op, arg));
}

float* CpuDevice::scratch(size_t floats) {
    const size_t bytes = floats * sizeof(float);
    if (!scratch_ || scratch_->bytes() < bytes) {
        scratch_.reset();  // release the old block before taking the bigger one
        scratch_ = std::make_unique<CpuBuffer>(this, bytes);
    }
    return static_cast<float*>(scratch_->data());
}

float* CpuDevice::f32_opt(const Tensor& t, int64_t n, const char* op, const char* arg) const {
    return t.buf ? f32(t, n, op, arg) : nullptr;
}

}  // namespace moetrain
