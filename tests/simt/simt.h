// SIMT harness (test-only): lets the kernels_cuda/ sources compile with g++ and run on the CPU
// with CUDA semantics, so our own kernels are executed in CI without a GPU.
//  - Blocks run one after another (in an order the scheduling seed may permute); the threads of
//    a block run concurrently as fibers (ucontext), switching at every synchronisation point.
//  - __shared__ variables have one copy per block (static storage, blocks are sequential);
//    dynamic shared memory (mt_dynamic_shared<T>() in kernels_cuda/common.cuh, which returns
//    simt::dynamic_shared() here) is poisoned with NaN bytes before each block so reads of
//    unwritten shared memory show up.
//  - __syncthreads() is a block barrier (all threads at the same call site, none returned);
//    warp shuffles / votes exchange values among the lanes of a 32-lane warp and check masks.
//  - Atomics are real atomics; threadIdx/blockIdx/blockDim/gridDim are per thread.
//  - Vector types (float4, uint2, uint4) have CUDA's size and alignment; a vector access at an
//    address that is not a multiple of its size throws simt::Error (a GPU would fault).
//  - Interleaving: a barrier or warp operation releases its threads the moment the last one
//    arrives, and the scheduler then picks the next ready thread by the seed: 0 = oldest first
//    (blocks in order); odd = uniformly at random; even = newest first, so a released warp runs
//    ahead of the rest of its block. Non-zero seeds also shuffle the block order. A missing
//    barrier or an order-dependent race therefore gives a wrong or varying result. Misuse
//    (divergent barriers, a shuffle naming a lane outside its mask, deadlock, too large a block)
//    throws simt::Error.
// kernels_cuda/README.md lists exactly what kernel code may use; nothing else is provided.
#pragma once

#define SIMT_HARNESS 1

#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// ---- CUDA qualifiers ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Block-scope thread_local is static: one copy, reused by each block in turn (blocks are
// sequential and all fibers of a block share the OS thread).
#define __shared__ thread_local

// ---- built-in types and index variables ----
struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
// Vector types with CUDA's layout and alignment (what 16- and 8-byte accesses go through).
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
    return {x, y, z, w};
}
inline uint2 make_uint2(unsigned x, unsigned y) {
    return {x, y};
}
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
    return {x, y, z, w};
}
// Inline (defined here, not extern): the compiler then reaches them with the local-exec TLS
// model in an executable instead of through initial-exec. With extern, GCC 12's UBSan null check
// reads the flags of the `add x@gottpoff(%rip)` that computes the address, and the linker
// rewrites that add into an `lea` (which sets no flags) when it relaxes the access, so the check
// read stale flags and reported "member access within null pointer of type uint3".
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;
// Dynamic shared memory a launch may ask for: 48 KiB by default on every GPU; mtk::launch opts a
// kernel in to more (cudaFuncSetAttribute) when its launch asks for more than launch.h's budget,
// up to the smallest opt-in maximum of a compute capability >= 8.0 device (sm_86 / sm_89: 99
// KiB; launch.h kMaxOptInShmem), which the callers of such launches check.
constexpr size_t kSimtMaxSharedBytes = 99 * 1024;

namespace simt {

class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// The running block's dynamic shared memory (what mt_dynamic_shared<T>() returns), 32-byte
// aligned (what WMMA fragment accesses need), kSimtMaxSharedBytes long.
unsigned char* dynamic_shared();

// ---- scheduling control (tests) ----
void set_seed(uint64_t seed);  // the interleaving policy and its random choices (see above)
uint64_t seed();
// Names of every kernel launched since the process started (template arguments stripped).
const std::set<std::string>& launched_kernels();

// ---- synchronisation (called by the CUDA built-ins below; switch fibers) ----
void block_barrier(const char* file, int line);
enum class WarpOp : uint8_t { shfl_idx, shfl_xor, shfl_down, shfl_up, ballot, any, all, sync };
uint64_t warp_exchange(WarpOp op, unsigned mask, uint64_t bits, int arg, int width);

// Runs `body` once per thread of every block of the grid (called by mtk::launch).
void run_grid(const char* name, dim3 grid, dim3 block, size_t shmem,
              const std::function<void()>& body);

// Stream work of the cudasim module (kernel grids, copies, GEMMs): runs `work` now, or appends
// it to the installed capture list (its fake CUDA Graph capture) without running it.
void submit(std::function<void()> work);
// Installs (or with nullptr removes) the list submit() appends to instead of running.
void set_capture_list(std::vector<std::function<void()>>* list);
std::vector<std::function<void()>>* capture_list();

// ---- vector memory accesses (mtk::load_vec / store_vec in kernels_cuda/common.cuh) ----
// A GPU faults on a vector access whose address is not a multiple of the vector's size, so the
// harness throws simt::Error then; every vector access is counted (vector_accesses()) so tests
// can tell which path a kernel took.
void count_vector_access();
uint64_t vector_accesses();  // since the process started
[[noreturn]] void misaligned_vector_access(const void* p, size_t bytes);
template <typename V>
V vector_load(const void* p) {
    static_assert(sizeof(V) == alignof(V), "a vector type is aligned to its size");
    if (reinterpret_cast<uintptr_t>(p) % sizeof(V) != 0) misaligned_vector_access(p, sizeof(V));
    count_vector_access();
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
}
template <typename V>
void vector_store(void* p, const V& v) {
    static_assert(sizeof(V) == alignof(V), "a vector type is aligned to its size");
    if (reinterpret_cast<uintptr_t>(p) % sizeof(V) != 0) misaligned_vector_access(p, sizeof(V));
    count_vector_access();
    std::memcpy(p, &v, sizeof(V));
}

template <typename T>
uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a type > 8 bytes");
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <typename T>
T from_bits(uint64_t b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}

}  // namespace simt

// Every fiber switch is a compiler memory barrier too, so shared/global values are re-read.
#define SIMT_FENCE() asm volatile("" ::: "memory")

inline void simt_syncthreads(const char* file, int line) {
    simt::block_barrier(file, line);
    SIMT_FENCE();
}
#define __syncthreads() simt_syncthreads(__FILE__, __LINE__)
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    simt::warp_exchange(simt::WarpOp::sync, mask, 0, 0, warpSize);
    SIMT_FENCE();
}
template <typename T>
T simt_shuffle(simt::WarpOp op, unsigned mask, T v, int arg, int width) {
    T r = simt::from_bits<T>(simt::warp_exchange(op, mask, simt::to_bits(v), arg, width));
    SIMT_FENCE();
    return r;
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = warpSize) {
    return simt_shuffle(simt::WarpOp::shfl_idx, mask, v, src, width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
    return simt_shuffle(simt::WarpOp::shfl_xor, mask, v, lane_mask, width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
    return simt_shuffle(simt::WarpOp::shfl_down, mask, v, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
    return simt_shuffle(simt::WarpOp::shfl_up, mask, v, static_cast<int>(delta), width);
}
inline unsigned simt_vote(simt::WarpOp op, unsigned mask, int pred) {
    auto r = static_cast<unsigned>(simt::warp_exchange(op, mask, pred != 0, 0, warpSize));
    SIMT_FENCE();
    return r;
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
    return simt_vote(simt::WarpOp::ballot, mask, pred);
}
inline int __any_sync(unsigned mask, int pred) {
    return static_cast<int>(simt_vote(simt::WarpOp::any, mask, pred));
}
inline int __all_sync(unsigned mask, int pred) {
    return static_cast<int>(simt_vote(simt::WarpOp::all, mask, pred));
}

// ---- atomics (real atomics on the addressed object) ----
template <typename T>
T simt_atomic_add(T* p, T v) {
    return std::atomic_ref<T>(*p).fetch_add(v);
}
inline float atomicAdd(float* p, float v) {
    return simt_atomic_add(p, v);
}
inline int atomicAdd(int* p, int v) {
    return simt_atomic_add(p, v);
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    return simt_atomic_add(p, v);
}
inline int atomicMax(int* p, int v) {
    std::atomic_ref<int> a(*p);
    int old = a.load();
    while (old < v && !a.compare_exchange_weak(old, v)) {
    }
    return old;
}
inline int atomicCAS(int* p, int expected, int desired) {
    std::atomic_ref<int>(*p).compare_exchange_strong(expected, desired);
    return expected;
}
inline unsigned atomicCAS(unsigned* p, unsigned expected, unsigned desired) {
    std::atomic_ref<unsigned>(*p).compare_exchange_strong(expected, desired);
    return expected;
}
inline int atomicExch(int* p, int v) {
    return std::atomic_ref<int>(*p).exchange(v);
}

// ---- intrinsics ----
inline int __popc(unsigned x) {
    return __builtin_popcount(x);
}
inline int __ffs(int x) {
    return __builtin_ffs(x);
}
inline int __clz(int x) {
    return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x));
}
inline unsigned __float_as_uint(float f) {
    return std::bit_cast<unsigned>(f);
}
inline float __uint_as_float(unsigned u) {
    return std::bit_cast<float>(u);
}
inline int __float_as_int(float f) {
    return std::bit_cast<int>(f);
}
inline float __int_as_float(int i) {
    return std::bit_cast<float>(i);
}
inline float rsqrtf(float x) {
    return 1.0f / std::sqrt(x);
}
#include "simt_wmma.h"  // nvcuda::wmma and the 16-bit float types (tensor-core kernels)
