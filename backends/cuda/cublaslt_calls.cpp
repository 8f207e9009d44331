// The cuBLASLt products with an epilogue (see cublaslt_calls.h).
#include "cuda/cublaslt_calls.h"

#include <climits>
#include <cstring>

#include "cuda/cublas_calls.h"
#include "cuda/cuda_errors.h"
#include "moetrain/error.h"

namespace moetrain::cuda {
namespace {

cudaDataType lt_type(DType t) {
    return t == DType::f32 ? CUDA_R_32F : t == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v,
              const char* what) {
    check_cublas(cublasLtMatmulDescSetAttribute(d, attr, static_cast<const void*>(&v), sizeof(v)),
                 what);
}
template <typename T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
    check_cublas(
        cublasLtMatmulPreferenceSetAttribute(p, attr, static_cast<const void*>(&v), sizeof(v)),
        "cublasLtMatmulPreferenceSetAttribute");
}

// The row-major GemmArgs an LtShape stands for (sizes only: to_column_major's mapping).
GemmArgs as_gemm(const LtShape& s) {
    GemmArgs g;
    g.ta = s.ta;
    g.tb = s.tb;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.lda = s.lda;
    g.ldb = s.ldb;
    g.ldc = s.ldc;
    return g;
}

// An address with exactly the given alignment (a power of two <= 256), for the heuristic, which
// reads only the alignment of the bias and aux pointers: an offset into a 256-aligned block.
alignas(256) const char kAlignProbe[512] = {};
const void* aligned_address(uint32_t align) {
    return kAlignProbe + align;
}

bool fits_int(int64_t v) {
    return v >= 0 && v <= INT_MAX;
}

}  // namespace

uint32_t lt_alignment(const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    uint32_t align = 256;
    while (align > 1 && a % align != 0) align /= 2;
    return align;
}

cublasLtEpilogue_t lt_epilogue(bool bias, EpilogueAct act, bool dbias) {
    if (dbias) return CUBLASLT_EPILOGUE_BGRADB;                         // alone (lt_shape_allowed)
    if (act == EpilogueAct::gelu_grad) return CUBLASLT_EPILOGUE_DGELU;  // no bias (checked)
    if (act == EpilogueAct::gelu)
        return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

bool lt_shape_allowed(const LtShape& s) {
    for (int64_t v : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc})
        if (!fits_int(v)) return false;
    if (s.m == 0 || s.n == 0 || s.k == 0) return false;
    if (s.dbias && (s.bias || s.act != EpilogueAct::none)) return false;
    // cuBLASLt: the GELU input's leading dimension (our n) must be a multiple of 8.
    return s.act == EpilogueAct::none || s.n % 8 == 0;
}

struct LtMatmul::Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A, B, C = D
    cublasLtMatmulAlgo_t algo{};
    bool found = false;
    ~Plan() {
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (desc) cublasLtMatmulDescDestroy(desc);
    }
};

LtMatmul::LtMatmul(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
    check_cublas(cublasLtCreate(&handle_), "cublasLtCreate");
}

LtMatmul::~LtMatmul() {
    plans_.clear();
    if (handle_) cublasLtDestroy(handle_);
}

// The descriptors of s and the heuristic's first algorithm. cuBLASLt's A is our B and its B our
// A (the transpose trick); the bias and GELU-input pointers are set to addresses with s's
// alignments (aligned_address: the heuristic reads only their alignment), the real ones at run().
LtMatmul::Plan* LtMatmul::plan(const LtShape& s) {
    auto it = plans_.find(s);
    if (it != plans_.end()) return it->second.get();
    auto p = std::make_unique<Plan>();
    Plan* plan = p.get();
    plans_.emplace(s, std::move(p));
    if (!lt_shape_allowed(s)) return plan;
    const ColumnMajorGemm cm = to_column_major(as_gemm(s));
    const cudaDataType ab = lt_type(s.compute);
    check_cublas(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "cublasLtMatmulDescCreate");
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, cm.transa, "cuBLASLt transa");
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, cm.transb, "cuBLASLt transb");
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
             static_cast<uint32_t>(lt_epilogue(s.bias, s.act, s.dbias)), "cuBLASLt epilogue");
    if (s.bias || s.dbias) {  // the bias, or where BGRADB writes the bias gradient
        const void* at = aligned_address(s.align[3]);
        set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, at, "cuBLASLt bias pointer");
        set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(CUDA_R_32F),
                 "cuBLASLt bias type");
    }
    if (s.act != EpilogueAct::none) {
        const void* at = aligned_address(s.align[4]);
        set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, at, "cuBLASLt aux pointer");
        set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<int64_t>(cm.m),
                 "cuBLASLt aux ld");
    }
    // Stored shapes as cuBLASLt sees them (column-major): A is m x k (N) or k x m (T), B is
    // k x n (N) or n x k (T), C is m x n.
    const bool an = cm.transa == CUBLAS_OP_N, bn = cm.transb == CUBLAS_OP_N;
    check_cublas(
        cublasLtMatrixLayoutCreate(&plan->a, ab, an ? cm.m : cm.k, an ? cm.k : cm.m, cm.lda),
        "cublasLtMatrixLayoutCreate (A)");
    check_cublas(
        cublasLtMatrixLayoutCreate(&plan->b, ab, bn ? cm.k : cm.n, bn ? cm.n : cm.k, cm.ldb),
        "cublasLtMatrixLayoutCreate (B)");
    check_cublas(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_32F, cm.m, cm.n, cm.ldc),
                 "cublasLtMatrixLayoutCreate (C)");
    cublasLtMatmulPreference_t pref = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
             static_cast<uint64_t>(workspace_bytes_));
    // cuBLASLt's A is our B: its alignments swap too.
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, s.align[1]);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, s.align[0]);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, s.align[2]);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, s.align[2]);
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    // No algorithm (NOT_SUPPORTED, or none returned) is an answer, not an error: the product
    // runs unfused. Any other failure is one.
    if (st != CUBLAS_STATUS_NOT_SUPPORTED) check_cublas(st, "cublasLtMatmulAlgoGetHeuristic");
    plan->found = st == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (plan->found) plan->algo = result.algo;
    return plan;
}

bool LtMatmul::supported(const LtShape& s) {
    return plan(s)->found;
}

void LtMatmul::run(const LtShape& s, const LtPointers& p, float alpha, float beta,
                   cudaStream_t stream, void* workspace) {
    Plan* pl = plan(s);
    MT_CHECK(pl->found, "cuBLASLt: no algorithm for this product (supported() was not asked)");
    if (s.bias) set_desc(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias, "cuBLASLt bias");
    if (s.dbias) {
        void* dbias = p.dbias;
        set_desc(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, dbias, "cuBLASLt bias gradient");
    }
    if (s.act != EpilogueAct::none) {
        void* aux = p.pre_act;
        set_desc(pl->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux, "cuBLASLt aux");
    }
    // cuBLASLt's A is our B (see plan()).
    check_cublas(cublasLtMatmul(handle_, pl->desc, &alpha, p.b, pl->a, p.a, pl->b, &beta, p.c,
                                pl->c, p.c, pl->c, &pl->algo, workspace, workspace_bytes_, stream),
                 "cublasLtMatmul (gemm_epilogue)");
}

}  // namespace moetrain::cuda
