// Device memory: a Buffer is one allocation owned by a Device; a Tensor is a typed, shaped
// view into a Buffer (element offset + dims). Tensors are cheap to copy (shared ownership).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "moetrain/dtype.h"
#include "moetrain/error.h"

namespace moetrain {

class Device;

// One device allocation. Backends derive from it and keep their handle (pointer, cl_mem...).
class Buffer {
  public:
    Buffer(Device* device, size_t bytes) : device_(device), bytes_(bytes) {}
    virtual ~Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Device* device() const { return device_; }
    size_t bytes() const { return bytes_; }

  private:
    Device* device_;
    size_t bytes_;
};

// Up to 4 dimensions, row-major, contiguous.
struct Shape {
    std::array<int64_t, 4> d{0, 0, 0, 0};
    int rank = 0;
    Shape() = default;
    Shape(std::initializer_list<int64_t> dims) {
        MT_CHECK(dims.size() <= 4, "tensor rank > 4");
        for (int64_t v : dims) d[rank++] = v;
    }
    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < rank; ++i) n *= d[i];
        return n;
    }
    int64_t operator[](int i) const { return d[i]; }
    bool operator==(const Shape& o) const {
        if (rank != o.rank) return false;
        for (int i = 0; i < rank; ++i)
            if (d[i] != o.d[i]) return false;
        return true;
    }
    std::string str() const {
        std::string s = "[";
        for (int i = 0; i < rank; ++i) {
            if (i) s += ',';
            s += std::to_string(d[i]);
        }
        s += ']';
        return s;
    }
};

struct Tensor {
    std::shared_ptr<Buffer> buf;  // null = empty tensor
    int64_t offset = 0;           // in elements of dtype from the start of buf
    DType dtype = DType::f32;
    Shape shape;

    bool empty() const { return !buf; }
    explicit operator bool() const { return static_cast<bool>(buf); }
    int64_t numel() const { return shape.numel(); }
    size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
    Device* device() const { return buf ? buf->device() : nullptr; }

    // A view of `shape` starting `elem_offset` elements after this tensor's start.
    Tensor view(int64_t elem_offset, Shape s) const {
        MT_CHECK(buf, "view of an empty tensor");
        Tensor t = *this;
        t.offset = offset + elem_offset;
        t.shape = s;
        MT_CHECK(static_cast<size_t>(t.offset + s.numel()) * dtype_size(dtype) <= buf->bytes(),
                 "tensor view ", s.str(), " at offset ", t.offset, " exceeds its buffer");
        return t;
    }
    // Same elements, new shape.
    Tensor reshape(Shape s) const {
        MT_CHECK(s.numel() == numel(), "reshape ", shape.str(), " -> ", s.str());
        Tensor t = *this;
        t.shape = s;
        return t;
    }
    // Rows [r0, r0+n) of the leading dimension.
    Tensor rows(int64_t r0, int64_t n) const {
        int64_t row = shape.rank ? numel() / shape[0] : 1;
        Shape s = shape;
        s.d[0] = n;
        return view(r0 * row, s);
    }
};

}  // namespace moetrain
