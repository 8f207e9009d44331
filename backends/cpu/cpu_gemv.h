// The one-row product of the CPU gemm: c = alpha * x W^T + beta * c for one row x against a
// weight W stored [n, k] row-major (m = 1, Trans::N x Trans::T: the linear layers at batch-1
// decoding). A memory-streaming matrix-vector product in one OpenMP region instead of a GEMM
// library call (docs/BENCHMARKS.md, "Decoding": the library is faster from m = 2 on, and at
// m = 1 on weights that stay in cache). cpu_gemv.cpp.
#pragma once

#include <cstdint>

#include "cpu/cpu_gemm.h"
#include "moetrain/device.h"

namespace moetrain::cpu {

// True when gemv computes g: one product (batch 1), m = 1, k >= 1, ta = N, tb = T (the rows
// of W are contiguous), compute f32 or bf16 (f16 keeps the library path: its conversions
// do not vectorise here).
bool gemv_applies(const GemmArgs& g);

// The product g (gemv_applies(g)) with A and W as stored (f32, or bf16 with compute bf16):
// every element of A and W is rounded to g.compute, c[j] = alpha * dot(x, w_j) + beta * c[j]
// with the dot product summed in f32 over the fixed lanes of cpu_simd.h (C is not read when
// beta = 0). The n rows of W are split into one contiguous block per OpenMP thread; results
// do not depend on the thread count.
// a_buf: room for k floats when g.compute is bf16 (x rounded to bf16), else unused.
void gemv(const GemmArgs& g, const StoredMatrix& a, const StoredMatrix& w, float* c, float* a_buf);

}  // namespace moetrain::cpu
