// The plain C++ interface between the kernel launchers of kernels_cuda/<family>.cuh and the
// host code around them: the stream type, the dtype and activation kinds the launchers take,
// the device error word's codes and messages, and the device-wide scan (MoE counting passes)
// and radix sort (embedding_bwd) the launchers are handed. No CUDA headers: backends/cuda's g++
// sources (cuda_device.cpp reads the error word; cub_scan.h, cub_sort.h) include it, and the
// launchers see it through common.cuh under nvcc and under the SIMT harness.
// Launchers themselves are declared and defined only in their family header: each
// kernels_cuda/<family>.cu includes it and holds the CudaDevice ops that call them.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;  // cudaStream_t is `CUstream_st*`; the harness passes nullptr

namespace mtk {

using Stream = CUstream_st*;

enum class ActKind : int { gelu = 0, relu = 1, silu = 2 };  // = moetrain::Act
enum class FloatKind : int { f32 = 0, bf16 = 1, f16 = 2 };  // = moetrain::DType

// Invalid index values are not read through: the kernel skips them and reports the first one
// into a two-word device error word `err` (code, offending value); err may be nullptr.
enum ErrorCode : int32_t {
    kErrTarget = 1,             // cross_entropy: target outside [0, V) and not -1
    kErrSortExpert = 2,         // moe_sort: expert index outside [0, E)
    kErrRouterExpert = 3,       // router_bwd: expert index outside [0, E)
    kErrEmbeddingFwdId = 4,     // embedding_fwd: token id outside the table
    kErrEmbeddingBwdId = 5,     // embedding_bwd: token id outside the table
    kErrGatherIndex = 6,        // gather_rows: row index outside the source
    kErrCombineRow = 7,         // moe_combine: slot_row entry outside the rows
    kErrCombineBwdRow = 8,      // moe_combine_bwd: slot_row entry outside the rows
    kErrGroupRows = 9,          // gemm_grouped: a negative group size
    kErrGroupTotal = 10,        // gemm_grouped: group sizes summing past the capacity
    kErrRopePosition = 11,      // rope: device position offset leaves [0, MT_POS_LIMIT)
    kErrAttnLength = 12,        // attention: device length puts Tk outside [Tq, S]
    kErrKvAppendPosition = 13,  // kv_append: device position offset leaves the cache
    kErrCapacityExpert = 14,    // moe_capacity: expert index outside [0, E)
};
inline const char* error_message(int32_t code) {
    switch (code) {
        case kErrTarget:
            return "cross_entropy: target outside [0, V) and not -1:";
        case kErrSortExpert:
            return "moe_sort: expert index outside [0, n_experts):";
        case kErrRouterExpert:
            return "router_bwd: expert index outside [0, n_experts):";
        case kErrEmbeddingFwdId:
            return "embedding_fwd: token id outside the table:";
        case kErrEmbeddingBwdId:
            return "embedding_bwd: token id outside the table:";
        case kErrGatherIndex:
            return "gather_rows: row index outside the source:";
        case kErrCombineRow:
            return "moe_combine: slot_row entry outside the rows:";
        case kErrCombineBwdRow:
            return "moe_combine_bwd: slot_row entry outside the rows:";
        case kErrGroupRows:
            return "gemm_grouped: negative group size:";
        case kErrGroupTotal:
            return "gemm_grouped: the group sizes sum past the capacity to";
        case kErrRopePosition:
            return "rope: device position offset outside [0, 2^30):";
        case kErrAttnLength:
            return "attention: device length makes Tk leave [Tq, S]:";
        case kErrKvAppendPosition:
            return "kv_append: device position offset outside the cache:";
        case kErrCapacityExpert:
            return "moe_capacity: expert index outside [0, n_experts):";
        default:
            return "unknown device error:";
    }
}

// The device-wide exclusive prefix sum the MoE counting passes (moe_sort, moe_capacity) run
// between their kernels: out[i] = in[0] + ... + in[i-1] for i < n, queued on s, with `temp`
// holding temp_bytes(n) bytes of device memory that overlap neither in nor out. The CUDA backend
// passes its cub wrapper (backends/cuda/cub_scan.h); the SIMT harness a host implementation of the
// same functions.
struct ExclusiveScan {
    size_t (*temp_bytes)(int64_t n);
    void (*run)(Stream s, const int32_t* in, int32_t* out, int64_t n, void* temp,
                size_t temp_bytes);
};

// The device-wide stable radix sort embedding_bwd runs between its kernels: the n (key, value)
// pairs of keys_in / vals_in, ordered by bits [0, end_bit) of the (non-negative) keys into
// keys_out / vals_out, equal keys in input order; queued on s, with `temp` holding
// temp_bytes(n, end_bit) bytes of device memory that overlap none of the four arrays. The CUDA
// backend passes its cub wrapper (backends/cuda/cub_sort.h); the SIMT harness a host
// implementation of the same functions.
struct RadixSortPairs {
    size_t (*temp_bytes)(int64_t n, int end_bit);
    void (*run)(Stream s, const int32_t* keys_in, int32_t* keys_out, const int32_t* vals_in,
                int32_t* vals_out, int64_t n, int end_bit, void* temp, size_t temp_bytes);
};

}  // namespace mtk
