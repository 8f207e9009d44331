// Grouped GEMMs whose per-group sizes and pointers live in device memory, run by CUTLASS's Hopper
// kernels (TMA loads, wgmma, a persistent tile scheduler that reads the sizes on the device):
// the MoE expert products of Device::gemm_grouped without host reads, padding or partial
// products (docs/CUDA.md, "Grouped GEMM"). Compiled by backends/cuda/cutlass_grouped.cu for
// sm_90a when the build finds CUTLASS's headers (tools/install-deps.sh installs them from PyPI);
// otherwise cutlass_grouped_none.cpp says it is absent and the cuBLAS tiling runs.
//
// Row-major view, as GemmArgs: D_i [M_i, N_i] = alpha op(A_i) [M_i, K_i] @ op(B_i) [K_i, N_i]
// + beta C_i, with C_i = D_i f32 and A, B bf16 or f16, every group with the same leading
// dimensions. The layouts with a kernel are the three the model uses: (ta, tb) = (N, T) the
// forward, (N, N) the input gradient and (T, N) the weight gradient.
#pragma once

#include <cstddef>
#include <cstdint>

#include "moetrain/device.h"

struct CUstream_st;  // cudaStream_t, without the CUDA headers (the SIMT harness has its own)

namespace moetrain::cuda {

// One call. problems: int32 [groups][3] (M, N, K) on the device. A group with M or N of 0 has
// no output tile and is skipped; one with K = 0 but M, N > 0 is not (its accumulators would
// never be zeroed), so an empty group must have M = 0 (grouped_problems writes (0, n, 0)). The
// pointer arrays hold one entry per group, on the device. scratch: cutlass_grouped_scratch()
// bytes, 256-byte aligned.
struct CutlassGroupedCall {
    Trans ta = Trans::N, tb = Trans::T;
    DType dtype = DType::bf16;
    int64_t groups = 0;
    const int32_t* problems = nullptr;
    const void* const* a_ptrs = nullptr;
    const void* const* b_ptrs = nullptr;
    float* const* c_ptrs = nullptr;
    int64_t lda = 0, ldb = 0, ldc = 0;
    float alpha = 1.0f, beta = 0.0f;
    void* scratch = nullptr;
    int sm_count = 0;
    CUstream_st* stream = nullptr;
};

// Whether this build has the CUTLASS kernels (sm_90a code: compute capability 9.0 only).
bool cutlass_grouped_built();
// Whether a kernel exists for the call's layout and dtype and its leading dimensions meet
// TMA's 16-byte alignment (the pointers are the caller's: 16-byte aligned bases).
bool cutlass_grouped_supports(Trans ta, Trans tb, DType dtype, int64_t lda, int64_t ldb,
                              int64_t ldc);
// Scratch bytes of a call: the per-group stride arrays and CUTLASS's workspace.
size_t cutlass_grouped_scratch(Trans ta, Trans tb, DType dtype, int64_t groups, int sm_count);
// Queues the call on its stream (throws if CUTLASS refuses it).
void cutlass_grouped_run(const CutlassGroupedCall& call);

}  // namespace moetrain::cuda
