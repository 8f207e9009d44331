// Device helpers shared by the kernel families: the launch call (nvcc triple-chevron or the
// SIMT harness), vector memory accesses, grid-stride indexing, warp and block reductions,
// dynamic shared memory and the 16-bit float conversions. Everything here is a template or an
// inline function, so any number of family headers may include it. Kernel code uses only what
// kernels_cuda/README.md lists.
#pragma once

#if !defined(__CUDACC__) && !defined(SIMT_HARNESS)
#error "kernels_cuda/*.cuh compile with nvcc, or with g++ after tests/simt/simt.h"
#endif

#include <cstdint>
#include <utility>

#include "launch.h"
#include "mt_math.h"
#include "kernel_interface.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include <tuple>

#include "moetrain/dtype.h"
#endif

// Dynamic shared memory of the running block, as T (32-byte aligned: WMMA needs it): the only way
// kernels reach dynamic shared memory (the harness hands out its per-block buffer instead).
template <typename T>
__device__ __forceinline__ T* mt_dynamic_shared() {
#if defined(__CUDACC__)
    extern __shared__ __align__(32) unsigned char mt_dyn_smem[];
    return reinterpret_cast<T*>(mt_dyn_smem);
#else
    return reinterpret_cast<T*>(simt::dynamic_shared());
#endif
}

namespace mtk {

constexpr unsigned kFullMask = 0xffffffffu;

// ---- vector memory accesses ----
// One access of the vector type V (float4, uint2, uint4) at p, which must be aligned to
// sizeof(V) (a GPU faults otherwise; the harness checks it and counts the access). The only
// way kernels make vector accesses.
template <typename V, typename T>
__device__ __forceinline__ V load_vec(const T* p) {
#if defined(__CUDACC__)
    return *reinterpret_cast<const V*>(p);
#else
    return simt::vector_load<V>(p);
#endif
}
template <typename V, typename T>
__device__ __forceinline__ void store_vec(T* p, const V& v) {
#if defined(__CUDACC__)
    *reinterpret_cast<V*>(p) = v;
#else
    simt::vector_store<V>(p, v);
#endif
}

// Queues `kernel` with geometry g on stream s. `name` is the kernel's name as written (used by
// the harness to record which kernels ran). Arguments convert to the kernel's parameter types.
// g.shmem above kMaxDynamicShmem opts the kernel in to that much (up to kMaxOptInShmem, for
// devices of compute capability >= kOptInShmemMinCc: the caller checks).
template <typename... KArgs, typename... Args>
void launch(const char* name, void (*kernel)(KArgs...), const Geom& g, Stream s, Args&&... args) {
#if defined(__CUDACC__)
    (void)name;
    // Above the budget the kernel must be opted in to the larger size (any failure, e.g. a size
    // the device lacks, surfaces as the launch's error).
    if (g.shmem > kMaxDynamicShmem)
        (void)cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(g.shmem));
    kernel<<<dim3(g.gx, g.gy, g.gz), dim3(g.block), g.shmem, s>>>(std::forward<Args>(args)...);
#else
    (void)s;
    // The parameters are copied now, as a real launch (or graph capture) does; submit runs the
    // grid at once, or hands it to the cudasim stand-in's graph capture (tests/simt/simt.h).
    std::tuple<KArgs...> params(std::forward<Args>(args)...);
    simt::submit([name, kernel, g, params] {
        simt::run_grid(name, dim3(g.gx, g.gy, g.gz), dim3(g.block), g.shmem,
                       [&] { std::apply(kernel, params); });
    });
#endif
}
// MT_LAUNCH(kernel, geom, stream, args...): a kernel with several template arguments is
// written in parentheses, MT_LAUNCH((k<1, 2>), ...).
#define MT_LAUNCH(kernel, g, s, ...) ::mtk::launch(#kernel, kernel, g, s, __VA_ARGS__)

// ---- indexing ----
__device__ __forceinline__ int64_t global_thread() {
    return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() {
    return static_cast<int64_t>(gridDim.x) * blockDim.x;
}
__device__ __forceinline__ unsigned lane_id() {
    return threadIdx.x & (kWarp - 1);
}
__device__ __forceinline__ unsigned warp_id() {
    return threadIdx.x / kWarp;
}

// Reports an invalid index (kernel_interface.h ErrorCode) into the device error word; the first
// report wins.
__device__ __forceinline__ void report_error(int32_t* err, int32_t code, int32_t value) {
    if (err && atomicCAS(reinterpret_cast<int*>(err), 0, static_cast<int>(code)) == 0)
        err[1] = value;
}
__device__ __forceinline__ bool in_range(int64_t i, int64_t n) {
    return i >= 0 && i < n;
}

// ---- warp reductions (every lane gets the result; fixed butterfly order) ----
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
    return v;
}

// ---- block reductions (blockDim.x a multiple of 32; every thread gets the result) ----
// Each call begins with a barrier, so consecutive calls may reuse the same shared slots.
template <typename T, typename Combine>
__device__ __forceinline__ T block_reduce(T v, Combine combine, T identity) {
    __shared__ T partial[32];
    for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(kFullMask, v, o));
    __syncthreads();
    if (lane_id() == 0) partial[warp_id()] = v;
    __syncthreads();
    T t = lane_id() < blockDim.x / kWarp ? partial[lane_id()] : identity;
    for (int o = 16; o > 0; o >>= 1) t = combine(t, __shfl_xor_sync(kFullMask, t, o));
    return t;
}
struct AddOp {
    template <typename T>
    __device__ __forceinline__ T operator()(T a, T b) const {
        return a + b;
    }
};
struct MaxOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ __forceinline__ float block_sum(float v) {
    return block_reduce(v, AddOp{}, 0.0f);
}
__device__ __forceinline__ double block_sum(double v) {
    return block_reduce(v, AddOp{}, 0.0);
}
__device__ __forceinline__ float block_max(float v) {
    return block_reduce(v, MaxOp{}, -INFINITY);
}

// ---- 16-bit floats (round to nearest even) ----
// nvcc: the CUDA intrinsics; the harness: the host conversions of moetrain/dtype.h, which round
// the same way.
#if defined(__CUDACC__)
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) {
    return __half_as_ushort(__float2half_rn(f));
}
__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
    return __half2float(__ushort_as_half(h));
}
#else
inline constexpr auto f32_to_bf16_bits = &moetrain::f32_to_bf16;
inline constexpr auto f32_to_f16_bits = &moetrain::f32_to_f16;
inline constexpr auto f16_bits_to_f32 = &moetrain::f16_to_f32;
#endif
__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
    return __uint_as_float(static_cast<unsigned>(h) << 16);
}

}  // namespace mtk
