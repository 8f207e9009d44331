// A stand-in for the cuBLASLt entry points backends/cuda/cublaslt_calls.cpp uses, on host memory,
// for the `cudasim` test module (see fake_cuda_runtime.cpp). The descriptors keep the attributes
// the backend sets and refuse any other (so a new attribute cannot go untested); the heuristic
// answers as cuBLASLt documents it for what it checks: operand types (A and B f32, bf16 or f16,
// the same; C f32; CUBLAS_COMPUTE_32F with f32 scale), stored shapes that match the transposes,
// an f32 bias, a GELU input whose leading dimension is a multiple of 8 and at least D's rows.
// cublasLtMatmul runs the column-major product (fake_gemm.h), then the epilogue per element in
// fp32: D = pre (+ bias[row]); with GELU the aux matrix receives pre and D = gelu(pre), with
// DGELU D = pre * gelu'(aux) (the tanh approximation and its derivative, mt_math.h); BGRADB
// writes bias[j] = the fp32 sum over k of op(B)[:, j], one per column of D, into the bias
// pointer. The work goes through simt::submit like every stream operation.
#include <cublasLt.h>

#include <cstring>
#include <functional>
#include <vector>

#include "cudasim/fake_gemm.h"
#include "mt_math.h"

namespace simt {
void submit(std::function<void()> work);
}  // namespace simt

struct cublasLtContext {};  // the handle's pointee (opaque in cublasLt.h)

namespace {

cublasLtContext g_lt_token;

struct Desc {
    cublasComputeType_t compute;
    cudaDataType scale;
    int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
    uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    void* bias = nullptr;  // read, or written by BGRADB
    int32_t bias_type = -1;
    void* aux = nullptr;
    int64_t aux_ld = 0;
};
struct Layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
};
struct Pref {
    uint64_t workspace = 0;
    uint32_t align[4] = {256, 256, 256, 256};
};

Desc* desc(cublasLtMatmulDesc_t d) {
    return reinterpret_cast<Desc*>(d);
}
Layout* layout(cublasLtMatrixLayout_t l) {
    return reinterpret_cast<Layout*>(l);
}

template <typename T>
cublasStatus_t put(T& field, const void* buf, size_t bytes) {
    if (!buf || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(static_cast<void*>(&field), buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

bool gelu_epilogue(uint32_t e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool aux_epilogue(uint32_t e) {  // reads or writes the aux (GELU input) matrix
    return gelu_epilogue(e) || e == CUBLASLT_EPILOGUE_DGELU;
}
bool bias_epilogue(uint32_t e) {  // reads the bias
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool bias_pointer(uint32_t e) {  // reads the bias, or writes the bias gradient there
    return bias_epilogue(e) || e == CUBLASLT_EPILOGUE_BGRADB;
}

// The heuristic's checks (see the top of the file).
bool plan_ok(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dd) {
    if (d.compute != CUBLAS_COMPUTE_32F || d.scale != CUDA_R_32F) return false;
    if (!fake::supported(a.type, b.type, c.type, d.compute) || dd.type != CUDA_R_32F) return false;
    if (c.rows != dd.rows || c.cols != dd.cols || c.ld != dd.ld) return false;
    const uint64_t m = c.rows, n = c.cols;
    const uint64_t k = d.transa == CUBLAS_OP_N ? a.cols : a.rows;
    const bool a_ok = d.transa == CUBLAS_OP_N ? a.rows == m : a.cols == m;
    const bool b_ok =
        d.transb == CUBLAS_OP_N ? (b.rows == k && b.cols == n) : (b.cols == k && b.rows == n);
    if (!a_ok || !b_ok) return false;
    const uint32_t e = d.epilogue;
    if (e != CUBLASLT_EPILOGUE_DEFAULT && !bias_pointer(e) && !aux_epilogue(e)) return false;
    if (bias_pointer(e) && d.bias_type != CUDA_R_32F && d.bias_type != -1) return false;
    if (aux_epilogue(e) && (d.aux_ld % 8 != 0 || d.aux_ld < static_cast<int64_t>(m))) return false;
    return true;
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
    *h = &g_lt_token;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t) {
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
    *d = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc{.compute = compute, .scale = scale});
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete desc(d);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t dh,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t bytes) {
    Desc& d = *desc(dh);
    switch (attr) {
        case CUBLASLT_MATMUL_DESC_TRANSA:
            return put(d.transa, buf, bytes);
        case CUBLASLT_MATMUL_DESC_TRANSB:
            return put(d.transb, buf, bytes);
        case CUBLASLT_MATMUL_DESC_EPILOGUE:
            return put(d.epilogue, buf, bytes);
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
            return put(d.bias, buf, bytes);
        case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
            return put(d.bias_type, buf, bytes);
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
            return put(d.aux, buf, bytes);
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
            return put(d.aux_ld, buf, bytes);
        default:
            return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
    if (ld < static_cast<int64_t>(rows > 0 ? rows : 1)) return CUBLAS_STATUS_INVALID_VALUE;
    *l = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete layout(l);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
    *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Pref);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete reinterpret_cast<Pref*>(p);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t ph,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t bytes) {
    Pref& p = *reinterpret_cast<Pref*>(ph);
    switch (attr) {
        case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
            return put(p.workspace, buf, bytes);
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
            return put(p.align[0], buf, bytes);
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
            return put(p.align[1], buf, bytes);
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
            return put(p.align[2], buf, bytes);
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
            return put(p.align[3], buf, bytes);
        default:
            return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
    if (requested < 1 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
    *returned = 0;
    if (!plan_ok(*desc(d), *layout(a), *layout(b), *layout(c), *layout(dd)))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    results[0] = cublasLtMatmulHeuristicResult_t{};
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t dh, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t ah, const void* B,
                              cublasLtMatrixLayout_t bh, const void* beta, const void* C,
                              cublasLtMatrixLayout_t ch, void* D, cublasLtMatrixLayout_t dh2,
                              const cublasLtMatmulAlgo_t* algo, void*, size_t, cudaStream_t) {
    const Desc d = *desc(dh);
    const Layout a = *layout(ah), b = *layout(bh), c = *layout(ch), dd = *layout(dh2);
    if (!algo || !plan_ok(d, a, b, c, dd)) return CUBLAS_STATUS_INVALID_VALUE;
    if (C != D) return CUBLAS_STATUS_NOT_SUPPORTED;  // the backend always writes C in place
    if (bias_pointer(d.epilogue) && !d.bias) return CUBLAS_STATUS_INVALID_VALUE;
    if (aux_epilogue(d.epilogue) && !d.aux) return CUBLAS_STATUS_INVALID_VALUE;
    const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
    const int m = static_cast<int>(dd.rows), n = static_cast<int>(dd.cols);
    const int k = static_cast<int>(d.transa == CUBLAS_OP_N ? a.cols : a.rows);
    simt::submit([=] {
        auto* out = static_cast<float*>(D);
        fake::gemm_one(static_cast<cublasOperation_t>(d.transa),
                       static_cast<cublasOperation_t>(d.transb), m, n, k, al, A, a.type,
                       static_cast<int>(a.ld), B, static_cast<int>(b.ld), be, out,
                       static_cast<int>(dd.ld));
        if (d.epilogue == CUBLASLT_EPILOGUE_BGRADB) {  // B is read as the product reads it
            auto* dbias = static_cast<float*>(d.bias);
            for (int j = 0; j < n; ++j) {
                float sum = 0;
                for (int p = 0; p < k; ++p)
                    sum += static_cast<float>(
                        fake::load(B, a.type,
                                   d.transb == CUBLAS_OP_N ? p + static_cast<long long>(j) * b.ld
                                                           : j + static_cast<long long>(p) * b.ld));
                dbias[j] = sum;
            }
        }
        const auto* bias = static_cast<const float*>(d.bias);
        auto* aux = static_cast<float*>(d.aux);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) {
                float& v = out[i + static_cast<long long>(j) * dd.ld];
                if (bias_epilogue(d.epilogue)) v = v + bias[i];
                float& x = aux ? aux[i + static_cast<long long>(j) * d.aux_ld] : v;
                if (d.epilogue == CUBLASLT_EPILOGUE_DGELU) {
                    v = v * mt_gelu_grad(x);
                } else if (gelu_epilogue(d.epilogue)) {
                    x = v;
                    v = mt_gelu(v);
                }
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
