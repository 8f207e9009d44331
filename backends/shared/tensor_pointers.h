// Tensors as typed pointers, for backends whose buffers are plain addresses (cpu: host memory,
// cuda: device memory). The front door (api/moetrain/device.h, backends/device_checks.cpp) has
// checked every tensor an op receives, so nothing is checked here. BufferT is the backend's
// Buffer subclass, with `void* data() const`.
#pragma once

#include <array>
#include <cstdint>

#include "moetrain/tensor.h"

namespace moetrain {

template <typename BufferT>
struct TensorPointers {
    // Address of t's first element (any dtype); nullptr for an empty tensor.
    static void* raw(const Tensor& t) {
        if (!t.buf) return nullptr;
        auto* base = static_cast<char*>(static_cast<const BufferT*>(t.buf.get())->data());
        return base + static_cast<size_t>(t.offset) * dtype_size(t.dtype);
    }
    static float* f32(const Tensor& t) { return static_cast<float*>(raw(t)); }
    static int32_t* i32(const Tensor& t) { return static_cast<int32_t*>(raw(t)); }
    // The pointers of several f32 tensors: `const auto [py, px] = f32s(y, x);`.
    template <typename... T>
    static std::array<float*, sizeof...(T)> f32s(const T&... t) {
        return {f32(t)...};
    }
};

}  // namespace moetrain
