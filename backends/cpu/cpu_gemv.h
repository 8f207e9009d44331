// The one-row bf16 product of the CPU gemm: c = alpha * x W^T + beta * c for one row x against
// a weight W stored [n, k] row-major (m = 1, Trans::N x Trans::T, compute bf16: the linear
// layers of a bf16 model at batch-1 decoding). A memory-streaming matrix-vector product in one
// OpenMP region instead of oneDNN's bf16 matmul, which on CPUs without AVX512-BF16 is ~1.5x
// slower here. In f32 the library measured as fast or faster (m = 1 is bandwidth-bound either
// way), and from m = 2 on the library wins; docs/BENCHMARKS.md, "Decoding". cpu_gemv.cpp.
#pragma once

#include <cstdint>

#include "cpu/cpu_gemm.h"
#include "moetrain/device.h"

namespace moetrain::cpu {

// True when gemv computes g: one product (batch 1), m = 1, k >= 1, ta = N, tb = T (the rows
// of W are contiguous), compute bf16.
bool gemv_applies(const GemmArgs& g);

// The product g (gemv_applies(g)) with A and W as stored (f32 or bf16): every element of A
// and W is rounded to bf16, c[j] = alpha * dot(x, w_j) + beta * c[j]
// with the dot product summed in f32 over the fixed lanes of cpu_simd.h (C is not read when
// beta = 0). The n rows of W are split into one contiguous block per OpenMP thread; results
// do not depend on the thread count.
// a_buf: room for k floats (x rounded to bf16).
void gemv(const GemmArgs& g, const StoredMatrix& a, const StoredMatrix& w, float* c, float* a_buf);

}  // namespace moetrain::cpu
