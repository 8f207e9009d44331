// Every cuBLASLt call of the backend: one product with a bias and / or GELU epilogue, a GELU
// or GELU-gradient epilogue, or a bias-gradient one (Device::gemm_epilogue), so the product's
// output is written once instead of being re-read by add_bias and act_fwd / act_bwd, and a
// weight gradient's dy is not read again by bias_grad. The row-major product maps onto
// cuBLASLt's column-major one as in cublas_calls.h (to_column_major): cuBLASLt's D is our C^T, so
// D's rows are our columns and the bias (one value per column of our C) is the per-row vector
// cuBLASLt adds; the GELU input (cuBLASLt's "aux" matrix, our pre-activation) is stored like D,
// with leading dimension n. The bias gradient of dW = dy^T x (our A = dy, transposed) is
// cuBLASLt's BGRADB: the sums of its B (our A) over k, one per column of D (our rows).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>

#include "moetrain/device.h"

namespace moetrain::cuda {

// What decides whether cuBLASLt can run a product and which algorithm it picks: the sizes,
// transposes, leading dimensions, the operands' type (g.compute: f32 operands, or bf16 / f16
// ones after the backend's conversion), the epilogue and the alignment of every pointer
// (cuBLASLt's heuristic depends on it). Plain data, comparable, so a plan is asked for once.
struct LtShape {
    Trans ta = Trans::N, tb = Trans::N;
    int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    DType compute = DType::f32;
    bool bias = false;
    EpilogueAct act = EpilogueAct::none;
    bool dbias = false;               // BGRADB (not with a bias or an activation)
    std::array<uint32_t, 5> align{};  // bytes: a, b, c, bias or dbias, pre_act (at most 256)
    auto operator<=>(const LtShape&) const = default;
};

// The alignment of a device address in bytes, capped at 256 (256 for a null pointer).
uint32_t lt_alignment(const void* p);

// The cuBLASLt epilogue of a product with / without a bias, its activation part, and whether it
// writes the bias gradient of its A.
cublasLtEpilogue_t lt_epilogue(bool bias, EpilogueAct act, bool dbias);

// Whether a product can be put to cuBLASLt at all, before any heuristic is asked: one value
// per cuBLASLt rule we know (32-bit sizes, the GELU input's leading dimension a multiple of 8,
// a non-empty product, a bias gradient only alone).
bool lt_shape_allowed(const LtShape& s);

// The pointers of one product (operands already of s.compute's type; C is also D).
struct LtPointers {
    const void* a = nullptr;
    const void* b = nullptr;
    float* c = nullptr;
    const float* bias = nullptr;
    float* pre_act = nullptr;
    float* dbias = nullptr;  // BGRADB writes (does not add) the bias gradient here
};

// One device's cuBLASLt handle and its plans: per LtShape the matmul descriptor, the matrix
// layouts and the algorithm the heuristic picked for the workspace given (or that it found
// none). A training step asks nothing new after its first call of each shape, so a graph
// capture queues only cublasLtMatmul.
class LtMatmul {
  public:
    explicit LtMatmul(size_t workspace_bytes);
    ~LtMatmul();
    LtMatmul(const LtMatmul&) = delete;
    LtMatmul& operator=(const LtMatmul&) = delete;

    // Whether cuBLASLt has an algorithm for s (lt_shape_allowed, then the heuristic, once).
    bool supported(const LtShape& s);
    // C = epilogue(alpha op(A) op(B) + beta C) on the stream, with the workspace given at
    // construction; supported(s) must be true and the pointers must have s's alignments.
    void run(const LtShape& s, const LtPointers& p, float alpha, float beta, cudaStream_t stream,
             void* workspace);

  private:
    struct Plan;
    Plan* plan(const LtShape& s);

    cublasLtHandle_t handle_ = nullptr;
    size_t workspace_bytes_;
    std::map<LtShape, std::unique_ptr<Plan>> plans_;
};

}  // namespace moetrain::cuda
