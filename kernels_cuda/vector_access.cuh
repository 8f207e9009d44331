// 16-byte accesses for the kernels that stream long f32 / 16-bit ranges (kernels_cuda/README.md
// says which and why). A range of n elements is cut (VecSplit) into a head of single
// elements, groups of W consecutive elements accessed as one vector (float4 for four f32,
// uint2 for four 16-bit values, uint4 for fills), and the single elements after the groups.
// Every stream of an op must allow the same cut: a stream at address p with e-byte elements
// can start a group at element i only when p + i*e is a multiple of W*e, so the streams must
// agree on (p / e) mod W. The cut is computed from the pointers at run time (tensor views
// start at any element), never assumed; streams that disagree take the single-element path
// throughout.
//
// Kernels are written once for both paths: for_split calls a generic body with Width<W> (a
// group) or Width<1> (one element), the body reads Lanes with load_lanes(w, p), applies the
// same per-element expression to each lane and writes them with store_lanes(w, p, v), so the
// vector and single-element paths compute bit-identical values.
#pragma once

#include "common.cuh"

namespace mtk {

// Elements [head, head + W * groups) are accessed W at a time, all others one at a time.
struct VecSplit {
    int64_t n = 0, head = 0, groups = 0;
};

// A stream's first element and element size (for streams whose type is a run-time choice).
struct VecPtr {
    const void* p;
    int bytes;
};
__host__ __device__ __forceinline__ VecPtr as_vec_ptr(VecPtr v) {
    return v;
}
template <typename T>
__host__ __device__ __forceinline__ VecPtr as_vec_ptr(const T* p) {
    return {p, static_cast<int>(sizeof(T))};
}

// The cut of n elements of every stream (typed pointers or VecPtr; a null stream takes no
// part) into groups of W elements.
template <int W = 4, typename... S>
__host__ __device__ __forceinline__ VecSplit vec_split(int64_t n, S... streams) {
    const VecPtr ptrs[] = {as_vec_ptr(streams)...};
    int phase = -1;  // element index of the first stream within its aligned group
    bool agree = true;
    for (const VecPtr& s : ptrs) {
        if (!s.p) continue;
        const uintptr_t a = reinterpret_cast<uintptr_t>(s.p), e = static_cast<uintptr_t>(s.bytes);
        const int ph = a % e != 0 ? -2 : static_cast<int>((a / e) % W);
        if (ph == -2 || (phase >= 0 && ph != phase)) agree = false;
        phase = ph;
    }
    VecSplit r;
    r.n = n;
    if (!agree || phase < 0) return r;
    r.head = (W - phase) % W < n ? (W - phase) % W : n;
    r.groups = (n - r.head) / W;
    return r;
}
// Whether rows of dim elements starting at each stream (a row gather, ...) can all be accessed
// W at a time: dim a multiple of W and every stream's first element at the start of a group.
template <int W = 4, typename... S>
__host__ __device__ __forceinline__ bool rows_vectorisable(int64_t dim, S... streams) {
    return dim % W == 0 && vec_split<W>(W, streams...).groups == 1;
}
// Every element one at a time.
__host__ __device__ __forceinline__ VecSplit single_elements(int64_t n) {
    VecSplit r;
    r.n = n;
    return r;
}
// How many elements of s are accessed one at a time.
template <int W = 4>
__host__ __device__ __forceinline__ int64_t vec_singles(const VecSplit& s) {
    return s.n - W * s.groups;
}

// The access width a body is called with: W consecutive elements.
template <int W>
struct Width {
    static constexpr int n = W;
};

// The W values one access reads or writes (registers once the lane loops are unrolled).
template <typename T, int W>
struct Lanes {
    T v[W];
    __device__ __forceinline__ T& operator[](int u) { return v[u]; }
    __device__ __forceinline__ const T& operator[](int u) const { return v[u]; }
};

template <typename T>
__device__ __forceinline__ Lanes<T, 1> load_lanes(Width<1>, const T* p) {
    return {{*p}};
}
template <typename T>
__device__ __forceinline__ void store_lanes(Width<1>, T* p, const Lanes<T, 1>& v) {
    *p = v[0];
}
__device__ __forceinline__ Lanes<float, 4> load_lanes(Width<4>, const float* p) {
    const float4 v = load_vec<float4>(p);
    return {{v.x, v.y, v.z, v.w}};
}
__device__ __forceinline__ void store_lanes(Width<4>, float* p, const Lanes<float, 4>& v) {
    store_vec(p, make_float4(v[0], v[1], v[2], v[3]));
}
// Four 16-bit values in one 8-byte access (element 0 in the low half of .x: little-endian).
__device__ __forceinline__ Lanes<uint16_t, 4> load_lanes(Width<4>, const uint16_t* p) {
    const uint2 v = load_vec<uint2>(p);
    return {{static_cast<uint16_t>(v.x & 0xffffu), static_cast<uint16_t>(v.x >> 16),
             static_cast<uint16_t>(v.y & 0xffffu), static_cast<uint16_t>(v.y >> 16)}};
}
__device__ __forceinline__ void store_lanes(Width<4>, uint16_t* p, const Lanes<uint16_t, 4>& v) {
    store_vec(p, make_uint2(v[0] | (static_cast<unsigned>(v[1]) << 16),
                            v[2] | (static_cast<unsigned>(v[3]) << 16)));
}

// Streams whose dtype is a run-time FloatKind (0 f32, 1 bf16, 2 f16): the element size, and
// lanes read widened to f32 / written from f32 (16-bit: rounded to nearest even), so that an
// op's output stored in 16 bits has the bits of its f32 value followed by `convert`.
__host__ __device__ __forceinline__ int kind_bytes(int kind) {
    return kind == 0 ? 4 : 2;
}

template <int W>
__device__ __forceinline__ Lanes<float, W> load_as_f32(Width<W> w, const void* src, int kind,
                                                       int64_t i) {
    if (kind == 0) return load_lanes(w, static_cast<const float*>(src) + i);
    const auto h = load_lanes(w, static_cast<const uint16_t*>(src) + i);
    Lanes<float, W> v;
    for (int u = 0; u < W; ++u) v[u] = kind == 1 ? bf16_bits_to_f32(h[u]) : f16_bits_to_f32(h[u]);
    return v;
}

template <int W>
__device__ __forceinline__ void store_from_f32(Width<W> w, void* dst, int kind, int64_t i,
                                               const Lanes<float, W>& v) {
    if (kind == 0) {
        store_lanes(w, static_cast<float*>(dst) + i, v);
        return;
    }
    Lanes<uint16_t, W> h;
    for (int u = 0; u < W; ++u) h[u] = kind == 1 ? f32_to_bf16_bits(v[u]) : f32_to_f16_bits(v[u]);
    store_lanes(w, static_cast<uint16_t*>(dst) + i, h);
}

// Calls body(Width<W>{}, i) with the first element i of every group of s, then
// body(Width<1>{}, i) for every single element; items are spread over the threads
// t, t + stride, ... (grid-stride: global_thread(), grid_threads(); block-stride: threadIdx.x,
// blockDim.x).
template <int W = 4, typename Body>
__device__ __forceinline__ void for_split(const VecSplit& s, int64_t t, int64_t stride, Body body) {
    for (int64_t g = t; g < s.groups; g += stride) body(Width<W>{}, s.head + W * g);
    const int64_t singles = vec_singles<W>(s);
    for (int64_t j = t; j < singles; j += stride)
        body(Width<1>{}, j < s.head ? j : j + W * s.groups);
}
// The same over the whole grid.
template <int W = 4, typename Body>
__device__ __forceinline__ void for_split_grid(const VecSplit& s, Body body) {
    for_split<W>(s, global_thread(), grid_threads(), body);
}

}  // namespace mtk
